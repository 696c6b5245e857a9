// Which clips a video yields, and at what size: musubi-tuner's frame_extraction modes, its frame dropping to the
// model's frame rate, and its bucket resolutions (docs/data.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ms {

// A clip of a video: `length` frames from frame `start`.
struct ClipRange {
  int64_t start = 0, length = 0;
};

struct FrameExtraction {
  std::string mode = "head";           // head | chunk | slide | uniform | full
  std::vector<int64_t> target_frames;  // clip lengths (all but full)
  int64_t stride = 1;                  // slide
  int64_t samples = 1;                 // uniform
  int64_t max_frames = 129;            // full
};

bool is_frame_extraction(const std::string& mode);

// The clips of a video of `frames` frames, for each target length in order (musubi-tuner's
// retrieve_latent_cache_batches), for length n in target_frames:
//   head:    (0, n)                                           when n <= frames
//   chunk:   (i, n) for i = 0, n, 2n, ...                     while i + n <= frames
//   slide:   (i, n) for i = 0, stride, 2 stride, ...          while i + n <= frames
//   uniform: `samples` starts int(k * ((frames - n) / (samples - 1))) for k = 0 .. samples - 1 (numpy's
//            linspace truncated, in double), {0} for one sample; repeated starts once (they are one cache file)
//   full:    (0, m) with m = min(frames, max_frames) rounded down to 4k + 1 (the VAE's frame stride)
std::vector<ClipRange> clip_ranges(const FrameExtraction& e, int64_t frames);

// The frames musubi-tuner keeps of a source at source_fps to make target_fps: frame i is kept when
// int(i * target_fps / source_fps) (the ratio summed in double, frame by frame) differs from the previous kept
// frame's. Returns the kept source indices of a video of `frames` frames.
std::vector<int64_t> resampled_frames(int64_t frames, double source_fps, double target_fps);

// The training resolution (width, height) of a source of `width` x `height` (musubi-tuner's BucketSelector, Wan's
// 16-pixel steps): without buckets, `resolution`; with them, the bucket of nearest aspect ratio among those of
// about resolution's area; with no_upscale, a source no larger than that area keeps its size rounded down to steps.
struct Resolution {
  int64_t width = 0, height = 0;
};
Resolution bucket_resolution(Resolution source, Resolution resolution, bool enable_bucket, bool no_upscale,
                             int64_t steps = 16);

}  // namespace ms
