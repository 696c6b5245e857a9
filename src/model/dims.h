// Per-call sizes: batch, latent video extents and the token grid after patching.
#pragma once
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace ms {

struct ModelDims {
  int64_t B = 0;                // batch
  int64_t F = 0, H = 0, W = 0;  // latent extents (input video)
  int64_t f = 0, h = 0, w = 0;  // token grid: F/pt, H/ph, W/pw
  int64_t L = 0;                // tokens per sample: f*h*w
  int64_t Lc = 0;               // context rows given (<= text_len)
  int64_t Lt = 0;               // text_len (context after padding)
  // Timesteps per sample (Wan2.2's t [B, L]): t is constant over each of time_rows equal runs of L / time_rows
  // tokens. 1: one t per sample (Wan2.1's t [B]); f: one per latent frame (TI2V's first frame at t = 0). The time
  // embedding and every modulation have B * time_rows rows, never one per token.
  int64_t time_rows = 1;
  // Latent frames at the start of each clip given clean (TI2V's image-to-video steps: the image's latent, at t = 0):
  // left out of the loss, whose runs are the F H W values of each clip's channel.
  int64_t cond_frames = 0;
  int64_t N() const { return B * L; }
  int64_t Bt() const { return B * time_rows; }  // rows of t, e [Bt, D], e0 [Bt, 6, D]
  int64_t Lr() const { return L / time_rows; }  // tokens per time row

  // Validates the extents against the config; throws ms::Error naming the bad value. time_rows must divide the
  // tokens per sample.
  static ModelDims make(const ModelConfig& c, int64_t B, int64_t F, int64_t H, int64_t W, int64_t Lc,
                        int64_t time_rows = 1);
};

// The step shapes of a run: one per bucket, at its largest batch. A run lays its buffers out once for all of them,
// each buffer as large as the largest shape needs (model/workspace.h: shapes_visitor), and runs each step at its
// bucket's dims without allocating. A single ModelDims converts to one shape.
struct StepShapes {
  std::vector<ModelDims> all;  // non-empty; every shape has the same text_len

  StepShapes(const ModelDims& d) : all{d} {}  // NOLINT(google-explicit-constructor): one shape is a set of shapes
  // Throws ms::Error when `shapes` is empty or the shapes disagree on text_len.
  explicit StepShapes(std::vector<ModelDims> shapes);

  // The largest f(d) over the shapes.
  template <class F>
  int64_t most(F&& f) const {
    int64_t m = 0;
    for (const ModelDims& d : all) m = m > f(d) ? m : f(d);
    return m;
  }
  // Whether a step at d fits the buffers: one of the shapes, or one at a smaller batch or with fewer time rows
  // (every buffer grows with B and B * time_rows).
  bool fits(const ModelDims& d) const;
};

}  // namespace ms
