#include "model/flops.h"

#include <algorithm>

namespace ms {
namespace {

struct Split {
  Flops stem_head, blocks;
};

Split forward_split(const ModelConfig& c, const ModelDims& d) {
  const double N = double(d.N()), D = double(c.dim), Nt = double(d.B * d.Lt), Bt = double(d.Bt());
  Split s;
  s.stem_head.gemm = 2 * N * D * double(c.in_dim * c.patch_volume())        // patch embedding
                     + 2 * Nt * D * double(c.text_dim + c.dim)              // text embedding
                     + 2 * Bt * D * double(c.freq_dim + c.dim + 6 * c.dim)  // time embedding, projection
                     + 2 * N * D * double(c.out_dim * c.patch_volume());    // head
  const auto& a = c.attention;
  double self_attn = N * self_attention_forward_flops(a, {d.f, d.h, d.w}) * D, offset_conv = 0, offset_proj = 0;
  if (a.has_offsets()) {
    offset_conv = 2 * N * D * 27;                                  // depthwise 3x3x3
    offset_proj = 2 * N * D * double(c.groups() * a.slots() * 3);  // [N, D] -> [N, G*P*3]
  }
  // self q, k, v, o on the video tokens; cross q, o on the video tokens and k, v on the context
  const double self_proj = 2 * N * D * D * 4, cross_proj = 2 * N * D * D * 2 + 2 * Nt * D * D * 2;
  const double ffn = 2 * N * D * double(c.ffn_dim) * 2, cross_attn = 4 * N * double(d.Lt) * D;
  const double layers = double(c.num_layers);
  s.blocks.gemm = layers * (self_proj + cross_proj + ffn + offset_proj);
  const bool sampled = a.type == AttentionType::dsa || a.type == AttentionType::dsa_fixed;
  s.blocks.attention = layers * ((sampled ? 0 : self_attn) + cross_attn);
  s.blocks.dsa = layers * ((sampled ? self_attn : 0) + offset_conv);
  return s;
}

}  // namespace

double self_attention_keys(const AttentionConfig& a, const std::array<int64_t, 3>& grid) {
  double keys = 1;
  for (size_t i = 0; i < 3; ++i)
    keys *= double(a.type == AttentionType::dense ? grid[i] : std::min(a.window[i], grid[i]));
  return keys;
}

double self_attention_forward_flops(const AttentionConfig& a, const std::array<int64_t, 3>& grid) {
  return 4 * self_attention_keys(a, grid) * (a.has_offsets() ? 8 : 1);
}

Flops forward_flops(const ModelConfig& c, const ModelDims& d) {
  Split s = forward_split(c, d);
  return {s.stem_head.gemm + s.blocks.gemm, s.stem_head.attention + s.blocks.attention, s.blocks.dsa};
}

Flops train_step_flops(const ModelConfig& c, const ModelDims& d) {
  Split s = forward_split(c, d);
  return {3 * s.stem_head.gemm + 4 * s.blocks.gemm, 3 * s.stem_head.attention + 4 * s.blocks.attention,
          4 * s.blocks.dsa};
}

Flops model_step_flops(const ModelConfig& c, const ModelDims& d) {
  Flops f = forward_flops(c, d);
  return {3 * f.gemm, 3 * f.attention, 3 * f.dsa};
}

double step_memory_bytes(const ModelConfig& c, const ModelDims& d, int act_bytes, bool recompute) {
  const double forward = double(d.N()) * double(25 * c.dim + 2 * c.ffn_dim) * act_bytes * double(c.num_layers);
  return forward * (recompute ? 4 : 3);
}

}  // namespace ms
