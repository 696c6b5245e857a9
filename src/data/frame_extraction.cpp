#include "data/frame_extraction.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/check.h"

namespace ms {

bool is_frame_extraction(const std::string& mode) {
  return mode == "head" || mode == "chunk" || mode == "slide" || mode == "uniform" || mode == "full";
}

std::vector<ClipRange> clip_ranges(const FrameExtraction& e, int64_t frames) {
  MS_CHECK(e.stride >= 1 && e.samples >= 1 && e.max_frames >= 1, "clip_ranges: stride ", e.stride, ", samples ",
           e.samples, ", max_frames ", e.max_frames, " must be positive");
  std::vector<ClipRange> out;
  if (e.mode == "full") {
    const int64_t m = std::min(frames, e.max_frames);
    if (m >= 1) out.push_back({0, (m - 1) / 4 * 4 + 1});
    return out;
  }
  MS_CHECK(is_frame_extraction(e.mode), "frame_extraction '", e.mode, "' is unknown");
  for (int64_t n : e.target_frames) {
    MS_CHECK(n >= 1, "clip length ", n, " must be positive");
    if (n > frames) continue;
    if (e.mode == "head") {
      out.push_back({0, n});
    } else if (e.mode == "chunk" || e.mode == "slide") {
      for (int64_t i = 0; i + n <= frames; i += e.mode == "chunk" ? n : e.stride) out.push_back({i, n});
    } else {  // uniform
      const double step = e.samples > 1 ? double(frames - n) / double(e.samples - 1) : 0.0;
      std::set<int64_t> seen;
      for (int64_t k = 0; k < e.samples; ++k) {
        const int64_t start = k == e.samples - 1 && e.samples > 1 ? frames - n : int64_t(double(k) * step);
        if (seen.insert(start).second) out.push_back({start, n});
      }
    }
  }
  return out;
}

std::vector<int64_t> resampled_frames(int64_t frames, double source_fps, double target_fps) {
  MS_CHECK(source_fps > 0 && target_fps > 0, "frame rates must be positive");
  const double delta = target_fps / source_fps;
  std::vector<int64_t> kept;
  double position = 0;
  int64_t previous = -1;
  for (int64_t i = 0; i < frames; ++i) {
    const int64_t target = int64_t(position);
    position += delta;
    if (target == previous) continue;
    previous = target;
    kept.push_back(i);
  }
  return kept;
}

Resolution bucket_resolution(Resolution source, Resolution resolution, bool enable_bucket, bool no_upscale,
                             int64_t steps) {
  if (!enable_bucket) return resolution;
  const int64_t area = resolution.width * resolution.height;
  const auto down = [steps](int64_t v) { return v - v % steps; };
  if (no_upscale && source.width * source.height <= area) return {down(source.width), down(source.height)};
  // The buckets: (w, h) and (h, w) for w from sqrt(area) / 2 to sqrt(area) in steps, h = area / w, both rounded
  // down to steps; sorted and unique, as musubi-tuner lists them.
  const int64_t side = int64_t(std::sqrt(double(area)));
  std::set<std::pair<int64_t, int64_t>> buckets;
  for (int64_t w = std::max(steps, down(side / 2)); w < side + steps; w += steps) {
    const int64_t h = down(area / w);
    if (h == 0) continue;
    buckets.insert({w, h});
    buckets.insert({h, w});
  }
  const double aspect = double(source.width) / double(source.height);
  Resolution best;
  double best_error = INFINITY;
  for (const auto& [w, h] : buckets) {  // the first of equal errors, as numpy's argmin
    const double error = std::fabs(double(w) / double(h) - aspect);
    if (error < best_error) best_error = error, best = {w, h};
  }
  return best;
}

}  // namespace ms
