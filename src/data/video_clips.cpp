#include "data/video_clips.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/frame_extraction.h"
#include "data/frames.h"
#include "io/atomic_file.h"
#include "io/video.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

bool is_video(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* e : {".mp4", ".webm", ".mkv", ".avi", ".mov", ".gif", ".m4v"})
    if (ext == e) return true;
  return false;
}

std::string trim(std::string s) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(s.back())) s.pop_back();
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  return s;
}

}  // namespace

// Videos of an entry: a directory's video files sorted by name (their captions are read by the
// constructor), or the lines of a JSONL file.
std::vector<VideoClips::Video> VideoClips::list(const DatasetEntry& e) const {
  std::vector<Video> out;
  std::error_code ec;
  if (!e.video_directory.empty()) {
    if (!fs::is_directory(e.video_directory, ec))
      MS_FAIL("video_directory '", e.video_directory, "' (in ", name(), ") does not exist or is not a directory");
    for (const auto& f : fs::directory_iterator(e.video_directory, ec))
      if (is_video(f.path())) out.push_back({f.path().string(), ""});
    if (ec) MS_FAIL("cannot list video_directory '", e.video_directory, "': ", ec.message());
    std::sort(out.begin(), out.end(), [](const Video& a, const Video& b) { return a.path < b.path; });
    if (out.empty())
      MS_FAIL("video_directory '", e.video_directory, "' holds no video files (.mp4 .webm .mkv .avi .mov .gif .m4v)");
    return out;
  }
  std::ifstream in(e.video_jsonl_file);
  if (!in) MS_FAIL("video_jsonl_file '", e.video_jsonl_file, "' (in ", name(), ") cannot be read");
  const fs::path base = fs::path(e.video_jsonl_file).parent_path();
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("video_path") || !j["video_path"].is_string() ||
        !j.contains("caption") || !j["caption"].is_string())
      MS_FAIL("'", e.video_jsonl_file, "' line ", n,
              ": expected {\"video_path\": \"...\", \"caption\": \"...\"} (two strings)");
    const fs::path p = j["video_path"].get<std::string>();
    out.push_back({(p.is_absolute() ? p : base / p).lexically_normal().string(), j["caption"].get<std::string>()});
  }
  if (out.empty()) MS_FAIL("video_jsonl_file '", e.video_jsonl_file, "' lists no videos");
  return out;
}

VideoClips::VideoClips(const DatasetFile& file, const std::vector<DatasetEntry>& entries, DataShape shape, bool fatal,
                       uint64_t seed)
    : ItemDataset(cat("dataset file '", file.path, "'"), fatal, seed), shape_(shape), batch_size_(file.batch_size) {
  for (const DatasetEntry& e : entries) {
    for (Video& v : list(e)) {
      try {
        if (!e.video_directory.empty()) {
          const std::string cap = fs::path(v.path).replace_extension(e.caption_extension).string();
          if (!fs::is_regular_file(cap)) MS_FAIL("'", v.path, "' has no caption file '", cap, "'");
          v.caption = trim(read_file(cap));
        }
        const VideoInfo info = probe_video(v.path);
        const auto starts = clip_starts(e.frame_extraction, info.frames, shape.frames, e.frame_stride, e.frame_sample);
        if (starts.empty()) MS_FAIL("'", v.path, "' is too short: ", info.frames, " frames, clips need ", shape.frames);
        videos_.push_back(std::move(v));
        for (int64_t r = 0; r < e.num_repeats; ++r)
          for (int64_t s : starts) clips_.push_back({int64_t(videos_.size()) - 1, s});
      } catch (const Error& err) {
        bad(err.what());
      }
    }
  }
  set_count(int64_t(clips_.size()));
}

DataSample VideoClips::load(int64_t item) {
  const Clip& c = clips_[size_t(item)];
  const Video& v = videos_[size_t(c.video)];
  const RgbVideo frames = decode_video(v.path, c.start, shape_.frames);
  const std::vector<uint8_t> rgb = resize_crop(frames, {shape_.height, shape_.width});  // [F, H, W, 3]
  DataSample s;
  s.x0.resize(size_t(3 * shape_.frames * shape_.height * shape_.width));  // [3, F, H, W]
  rgb_to_model(rgb.data(), shape_.frames, shape_.height, shape_.width, s.x0.data());
  s.caption = v.caption;
  return s;
}

}  // namespace ms
