// The small odd model config the model-level tests share (test_model, test_model_attention, the CUDA block test).
#pragma once
#include <array>
#include <string>

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

// c with self-attention `type` over `window` (offset_groups for dsa: 0 means one group per head), validated.
inline ModelConfig with_attention(ModelConfig c, const std::string& type, const std::array<int64_t, 3>& window,
                                  int64_t offset_groups = 0) {
  c.attention.type = parse_name<AttentionType>(type, "test");
  c.attention.window = window;
  c.attention.offset_groups = offset_groups;
  c.validate();
  return c;
}

}  // namespace ms::test
