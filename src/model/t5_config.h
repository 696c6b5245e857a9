// Wan2.1's text encoder, the umT5-XXL encoder (T5Encoder in Wan's wan/modules/t5.py): its configuration, the names
// and shapes of its parameters as Wan's state dict has them, and T5's relative-position buckets (docs/text_encoder.md).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ms {

inline constexpr double kT5NormEps = 1e-6;  // T5LayerNorm's epsilon

struct T5Config {
  int64_t vocab = 256384;   // embedding rows (umT5's 256k pieces, padded)
  int64_t dim = 4096;       // model width: the context's last dim
  int64_t dim_attn = 4096;  // q/k/v width, num_heads heads of dim_attn / num_heads
  int64_t dim_ffn = 10240;  // gated FFN width
  int64_t num_heads = 64;
  int64_t num_layers = 24;
  int64_t num_buckets = 32;  // relative-position buckets, bidirectional
  bool shared_pos = false;   // one position table for all layers (T5 v1.1) instead of one per layer (umT5)
  int64_t text_len = 512;    // tokens kept per prompt, EOS included

  int64_t head_dim() const { return dim_attn / num_heads; }
};

// The config from a JSON file with the keys of docs/text_encoder.md (vocab, dim, dim_attn, dim_ffn, num_heads,
// num_layers, num_buckets, shared_pos, text_len; each optional, umT5-XXL's value when absent); "" = umT5-XXL's. Throws
// ms::Error naming the file, the key and the valid values.
T5Config read_t5_config(const std::string& path);

// Throws ms::Error when the config cannot be run (what = where it came from, for the message).
void check_t5_config(const T5Config& c, const std::string& what);

// Every parameter's name and shape, in the order of Wan's state dict.
std::vector<std::pair<std::string, Shape>> t5_param_shapes(const T5Config& c);
int64_t t5_param_count(const T5Config& c);
// Multiply-adds x 2 of the encoder (backend/cpu/t5_encoder.h) on L tokens: the projections and the FFN (2 L per
// weight) and attention (4 L^2 dim_attn).
double t5_encode_flops(const T5Config& c, int64_t L);

// The bucket of relative offset r = key position - query position (T5's bidirectional bucketing, max distance 128):
// |r| < num_buckets/4 exactly, then logarithmic up to 128, clamped; keys after the query use the upper half.
int64_t t5_bucket(int64_t r, int64_t num_buckets);
// The bucket of every offset r = key - query in (-L, L), at index r + L - 1 [2L - 1].
std::vector<int64_t> t5_offset_buckets(int64_t L, int64_t num_buckets);

// The name under Wan's T5Encoder of a Hugging Face UMT5EncoderModel / T5 encoder parameter ("shared.weight",
// "encoder.block.3.layer.1.DenseReluDense.wi_0.weight", ...); "" for names that are neither (a full model's
// decoder.* and lm_head.*) or that are already Wan's. shared_pos: block 0's table is the shared one (T5 v1.1).
std::string wan_t5_name(const std::string& hf_name, bool shared_pos);

}  // namespace ms
