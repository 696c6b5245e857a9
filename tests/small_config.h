// The small odd model config the model-level tests share (test_model, test_model_attention, the CUDA block test).
#pragma once
#include "model/config.h"

namespace ms::test {

// Small odd config: head dim 12 (RoPE parts 2/2/2 pairs), out_dim != in_dim, context shorter than text_len.
inline ModelConfig small_config() {
  ModelConfig c;
  c.dim = 24;
  c.ffn_dim = 37;
  c.num_heads = 2;
  c.num_layers = 2;
  c.in_dim = 3;
  c.out_dim = 5;
  c.text_len = 7;
  c.text_dim = 11;
  c.freq_dim = 10;
  c.patch_size = {1, 2, 2};
  c.validate();
  return c;
}

}  // namespace ms::test
