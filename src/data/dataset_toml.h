// Dataset files in musubi-tuner's TOML style (docs/data.md):
//
//   [general]                      # defaults for every [[datasets]] entry
//   resolution = [W, H]            # clips are resized (aspect kept) and centre-cropped to this
//   caption_extension = ".txt"     # caption file beside each video: clip.mp4 -> clip.txt
//   batch_size = 2                 # used when --batch-size is not given
//   [[datasets]]
//   video_directory = "videos"     # or video_jsonl_file = "list.jsonl" ({"video_path", "caption"} per line)
//                                  # or cache_directory = "cache" (latent cache; wins when also given)
//   target_frames = 16             # frames per clip (an integer, or a list of one)
//   frame_extraction = "head"      # head | uniform | slide
//   frame_stride = 4               # slide: step between clip starts
//   frame_sample = 3               # uniform: clips per video, starts evenly spaced
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
  int64_t width = 0, height = 0;                                   // resolution (0: not given)
  std::string caption_extension = ".txt";
  int64_t target_frames = 0;  // 0: not given
  std::string frame_extraction = "head";
  int64_t frame_stride = 1, frame_sample = 1, num_repeats = 1;
};

struct DatasetFile {
  std::string path;
  int64_t batch_size = 0;  // 0: not given
  std::vector<DatasetEntry> datasets;
};

// Parses TOML text; `path` names the file in errors and anchors relative paths.
DatasetFile parse_dataset_toml(const std::string& text, const std::string& path);
// Reads and parses a dataset file.
DatasetFile read_dataset_toml(const std::string& path);

}  // namespace ms
