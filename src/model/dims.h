// Per-call sizes: batch, latent video extents and the token grid after patching.
#pragma once
#include <cstdint>

#include "model/config.h"

namespace ms {

struct ModelDims {
  int64_t B = 0;                // batch
  int64_t F = 0, H = 0, W = 0;  // latent extents (input video)
  int64_t f = 0, h = 0, w = 0;  // token grid: F/pt, H/ph, W/pw
  int64_t L = 0;                // tokens per sample: f*h*w
  int64_t Lc = 0;               // context rows given (<= text_len)
  int64_t Lt = 0;               // text_len (context after padding)
  int64_t N() const { return B * L; }

  // Validates the extents against the config; throws ms::Error naming the bad value.
  static ModelDims make(const ModelConfig& c, int64_t B, int64_t F, int64_t H, int64_t W, int64_t Lc);
};

}  // namespace ms
