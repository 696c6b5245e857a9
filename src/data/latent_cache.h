// Latent caches (docs/data.md): the cache_directory entries of a dataset TOML, in either of two formats.
//
// musubi-tuner's Wan cache (docs/data.md), as its wan_cache_latents.py and wan_cache_text_encoder_outputs.py
// write it: per clip a latent file {item}_{W:04d}x{H:04d}_wan.safetensors (image) or
// {item}_{pos:05d}-{count:03d}[-NN]_{W:04d}x{H:04d}_wan.safetensors (video clip) holding
// latents_{F}x{H}x{W}_{dtype} [C, F, H, W], and per item a text file {item}_wan_te.safetensors holding
// varlen_t5_{dtype} [L, text_dim]. A video clip's item key is its name less the last three '_' fields,
// an image's less two; every chunk of a video shares the video's text file. i2v and control tensors
// (clip_*, latents_image_*, latents_control_*, f_indices_*) are ignored by a t2v model, with one warning
// per kind.
//
// megaslide's earlier format: any other .safetensors file holding `latents` [C, F, H, W] and `context`
// [L, text_dim] together.
//
// Files are listed in name order. C must equal the model's in_dim, text_dim the model's, 1 <= L <=
// text_len. A file that breaks the format, has no text file, names another architecture, holds a
// tensor whose shape disagrees with its key, or holds non-finite values is bad data (--on-bad-data).
// Every latent shape is a bucket (data/item_dataset.h); the requested --frames/--height/--width (nonzero) keep
// only the shapes that agree with them (the others are left out, counted in one log line).
#pragma once
#include <string>
#include <vector>

#include "data/dataset_toml.h"
#include "data/item_dataset.h"

namespace ms {

// One clip of a cache: where its latents and its text embedding are, and under which tensor names.
struct CacheClip {
  std::string latent_file, latent_key;  // [C, F, H, W]
  std::string text_file, text_key;      // [L, text_dim]; megaslide's format: the latent file itself
  DataShape shape;
};

class LatentCache : public ItemDataset {
 public:
  // entries: the file's cache entries; o: the model's in_dim/text_len/text_dim, any requested F/H/W and batch size.
  LatentCache(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o);
  bool cached_text() const override { return true; }

 protected:
  DataSample load(int64_t item) override;

 private:
  int64_t text_len_, text_dim_;
  std::vector<CacheClip> clips_;  // good clips of the shapes asked for
};

// The latent file musubi-tuner's wan_cache_latents.py writes for a clip of the video or image `file`:
// {stem}_{start:05d}-{frames:03d}_{W:04d}x{H:04d}_wan.safetensors (video clip) or
// {stem}_{W:04d}x{H:04d}_wan.safetensors (image), W x H the file's own frame size.
std::string musubi_latent_name(const std::string& file, bool image, int64_t start, int64_t frames, int64_t width,
                               int64_t height);

// Writes latents [C, F, H, W] (shape) as musubi-tuner does: bf16 under latents_{F}x{H}x{W}_bfloat16, metadata
// architecture wan, width / height (the file's frame size), format_version 1.0.1 and, for video clips
// (frame_count > 0), frame_count. Atomic (io/safetensors.h).
void write_latent_cache(const std::string& path, const float* latents, const DataShape& shape, int64_t width,
                        int64_t height, int64_t frame_count);

// The text-encoder file musubi-tuner's wan_cache_text_encoder_outputs.py writes for the video or image `file` (one per
// file, whatever its clips): {stem}_wan_te.safetensors.
std::string musubi_text_name(const std::string& file);

// Writes a text embedding [rows, dim] as musubi-tuner does: bf16 under varlen_t5_bfloat16, metadata architecture wan,
// caption1 (the caption) and format_version 1.0.1. Atomic (io/safetensors.h).
void write_text_cache(const std::string& path, const float* context, int64_t rows, int64_t dim,
                      const std::string& caption);

// The embedding [L, text_dim] (1 <= L <= text_len) of a musubi-tuner text-encoder cache file
// ({item}_wan_te.safetensors: varlen_t5_{dtype}), as f32. Throws ms::Error naming the file and the problem.
std::vector<float> read_text_cache(const std::string& path, int64_t text_len, int64_t text_dim);

}  // namespace ms
