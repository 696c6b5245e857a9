#include "plan/flops.h"

namespace ms {
namespace {

struct Split {
  Flops stem_head, blocks;
};

Split forward_split(const ModelConfig& c, const ModelDims& d) {
  const double N = double(d.N()), D = double(c.dim), Nt = double(d.B * d.Lt), B = double(d.B);
  Split s;
  s.stem_head.gemm = 2 * N * D * double(c.in_dim * c.patch_volume())          // patch embedding
                     + 2 * Nt * D * double(c.text_dim + c.dim)                 // text embedding
                     + 2 * B * D * double(c.freq_dim + c.dim + 6 * c.dim)      // time embedding, projection
                     + 2 * N * D * double(c.out_dim * c.patch_volume());       // head
  const auto& a = c.attention;
  double keys = double(d.L);  // keys each query attends to in self-attention
  if (a.type != "dense") keys = double(a.window[0] * a.window[1] * a.window[2]);
  // self q, k, v, o on the video tokens; cross q, o on the video tokens and k, v on the context
  const double self_proj = 2 * N * D * D * 4, cross_proj = 2 * N * D * D * 2 + 2 * Nt * D * D * 2;
  const double ffn = 2 * N * D * double(c.ffn_dim) * 2;
  s.blocks.gemm = double(c.num_layers) * (self_proj + cross_proj + ffn);
  s.blocks.attention = double(c.num_layers) * (4 * N * keys * D + 4 * N * double(d.Lt) * D);
  return s;
}

}  // namespace

Flops forward_flops(const ModelConfig& c, const ModelDims& d) {
  Split s = forward_split(c, d);
  return {s.stem_head.gemm + s.blocks.gemm, s.stem_head.attention + s.blocks.attention};
}

Flops train_step_flops(const ModelConfig& c, const ModelDims& d) {
  Split s = forward_split(c, d);
  return {3 * s.stem_head.gemm + 4 * s.blocks.gemm, 3 * s.stem_head.attention + 4 * s.blocks.attention};
}

}  // namespace ms
