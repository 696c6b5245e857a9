// Dataset files in musubi-tuner's TOML style (docs/data.md):
//
//   [general]                      # defaults for every [[datasets]] entry
//   resolution = [W, H]            # clips are resized (aspect kept) and centre-cropped to this (or one integer)
//   caption_extension = ".txt"     # caption file beside each video: clip.mp4 -> clip.txt
//   batch_size = 2                 # clips per batch unless --batch-size is given (default 1)
//   [[datasets]]
//   video_directory = "videos"     # or video_jsonl_file = "list.jsonl" ({"video_path", "caption"} per line),
//                                  # image_directory = "images", image_jsonl_file ({"image_path", "caption"})
//                                  # or cache_directory = "cache" (latent cache; wins when also given)
//   target_frames = [1, 17]        # frames per clip: an integer or a list (a clip of each length)
//   frame_extraction = "head"      # head | chunk | slide | uniform | full
//   frame_stride = 4               # slide: step between clip starts
//   frame_sample = 3               # uniform: clips per video, starts evenly spaced
//   max_frames = 129               # full: the longest clip
//   source_fps = 30.0              # the videos' frame rate: frames are dropped to 16 fps as musubi-tuner does
//   enable_bucket = true           # per-video resolution of the nearest aspect ratio (bucket_no_upscale too)
//   num_repeats = 1                # how often each clip appears per epoch
//
// Per-dataset keys override [general]. Relative paths are relative to the TOML file's directory.
// Unknown keys are warned about; a wrong type or value is an ms::Error naming the key and the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ms {

struct DatasetEntry {
  std::string video_directory, video_jsonl_file, cache_directory;  // resolved paths ("": not given)
  std::string image_directory, image_jsonl_file;                   // images: one-frame clips
  int64_t width = 0, height = 0;                                   // resolution (0: not given)
  std::string caption_extension = ".txt";
  std::vector<int64_t> target_frames;  // empty: not given
  std::string frame_extraction = "head";
  int64_t frame_stride = 1, frame_sample = 1, max_frames = 129, num_repeats = 1;
  int64_t batch_size = 1;  // musubi-tuner's default
  double source_fps = 0;   // the videos' frame rate, dropped to the model's 16 (0: used as they are)
  bool enable_bucket = false, bucket_no_upscale = false;
  std::vector<std::string> unsupported;  // musubi-tuner keys megaslide cannot apply to files (fine with a cache)

  // Whether the entry's files are images (one-frame clips) rather than videos.
  bool images() const { return !image_directory.empty() || !image_jsonl_file.empty(); }
  // Whether it lists video or image files (it may name a cache_directory too: `megaslide cache` fills that).
  bool has_files() const { return images() || !video_directory.empty() || !video_jsonl_file.empty(); }
};

struct DatasetFile {
  std::string path;
  std::vector<DatasetEntry> datasets;
};

// Parses TOML text; `path` names the file in errors and anchors relative paths.
DatasetFile parse_dataset_toml(const std::string& text, const std::string& path);
// Throws ms::Error naming the file when an entry of video or image files cannot make clips: no target_frames
// (videos, but for frame_extraction full) or no resolution.
void check_file_entry(const DatasetFile& file, const DatasetEntry& e);

// Reads and parses a dataset file.
DatasetFile read_dataset_toml(const std::string& path);

}  // namespace ms
