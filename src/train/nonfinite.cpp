#include "train/nonfinite.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace ms {

int64_t count_nonfinite(const float* x, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bad += (u & 0x7f800000u) == 0x7f800000u;
  }
  return bad;
}

void NonFiniteMonitor::probe(int64_t s, float* out, int64_t n) {
  if (forward_.step == inject_nan_activation_ && s == cfg_.num_layers / 2 + 1)
    out[n / 2] = std::numeric_limits<float>::quiet_NaN();
  if (forward_.stage >= 0) return;
  if (const int64_t bad = count_nonfinite(out, n); bad > 0) forward_ = {forward_.step, s, bad, n};
}

std::string NonFiniteMonitor::stage_name(int64_t s) const {
  return s == 0 ? std::string("the stem") : s <= cfg_.num_layers ? cat("block ", s - 1) : std::string("the head");
}

std::string NonFiniteMonitor::check_batch(const ModelDims& d, const float* x0, const float* context,
                                          int64_t position) const {
  const int64_t clip = cfg_.in_dim * d.F * d.H * d.W, ctx = cfg_.text_len * cfg_.text_dim;
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t video = count_nonfinite(x0 + b * clip, clip);
    const int64_t caption = count_nonfinite(context + b * ctx, ctx);
    if (video + caption > 0)
      return cat("non-finite input data in clip ", b, " of the batch (data sample ", position + b, "): ", video,
                 " of its ", clip, " values and ", caption, " of its ", ctx, " caption-embedding values");
  }
  return "";
}

std::string NonFiniteMonitor::locate(double loss, double norm, const std::vector<double>& stage_sumsq) const {
  if (forward_.stage >= 0)
    return cat("non-finite activations: the forward output of ", stage_name(forward_.stage), " has ",
               forward_.nonfinite, " of ", forward_.values, " values not finite (every stage before it is finite)");
  int64_t bad = 0, first = -1;
  for (size_t s = 0; s < stage_sumsq.size(); ++s)
    if (!std::isfinite(stage_sumsq[s])) {
      ++bad;
      first = int64_t(s);
    }
  if (bad > 0)
    return cat("non-finite gradients in ", bad, " of ", stage_sumsq.size(),
               " stages (first in the backward: ", stage_name(first), "; loss ", loss, ", forward finite)");
  return cat("non-finite loss ", loss, " or gradient norm ", norm, " from a finite forward");
}

}  // namespace ms
