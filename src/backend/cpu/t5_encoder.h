// The umT5 encoder's forward on the CPU (Wan's T5Encoder, float32): one prompt's tokens in, their context rows out.
// Each layer's weights are widened from the mapped file panel by panel right before their GEMM, so an encode needs
// the file's pages plus its activations, never a float32 copy of a layer.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/t5_forward.h"

namespace ms {

// ids [L] (token ids, EOS included, no padding) -> context [L, dim]: token embedding, per layer
// x += Attn(RMSNorm(x)) and x += FFN(RMSNorm(x)), then the final RMSNorm. Attention is T5's: no 1/sqrt(head_dim),
// plus each layer's bucketed relative-position bias; the FFN is fc2(fc1(x) * gelu_tanh(gate(x))). A prompt run
// alone on its L tokens equals Wan's padded batch trimmed to L rows (padding keys get weight 0). Throws ms::Error
// for an id outside the vocabulary or a non-finite output (weights that overflow float32).
std::vector<float> t5_encode(const T5Weights& w, const std::vector<int64_t>& ids);

// t5_encode behind the backends' interface.
std::unique_ptr<T5Forward> cpu_t5_forward();

}  // namespace ms
