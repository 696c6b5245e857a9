#include "data/video_clips.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"
#include "data/frame_extraction.h"
#include "data/frames.h"
#include "io/atomic_file.h"
#include "io/video.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// The files an entry lists: videos or images (one-frame clips), from a folder or a JSON Lines file.
struct Source {
  const char* kind;  // "video" | "image"
  std::string directory, jsonl;
  std::vector<const char*> extensions;
};

Source source_of(const DatasetEntry& e) {
  if (e.images()) return {"image", e.image_directory, e.image_jsonl_file, {".png", ".jpg", ".jpeg", ".webp", ".bmp"}};
  return {"video", e.video_directory, e.video_jsonl_file, {".mp4", ".webm", ".mkv", ".avi", ".mov", ".gif", ".m4v"}};
}

bool has_extension(const fs::path& p, const Source& s) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* e : s.extensions)
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

// Videos (or images) of an entry: a directory's files sorted by name (their captions are read by the constructor),
// or the lines of a JSONL file.
std::vector<VideoClips::Video> VideoClips::list(const DatasetEntry& e) const {
  const Source src = source_of(e);
  const std::string dir_key = cat(src.kind, "_directory"), jsonl_key = cat(src.kind, "_jsonl_file");
  std::vector<Video> out;
  std::error_code ec;
  if (!src.directory.empty()) {
    if (!fs::is_directory(src.directory, ec))
      MS_FAIL(dir_key, " '", src.directory, "' (in ", name(), ") does not exist or is not a directory");
    for (const auto& f : fs::directory_iterator(src.directory, ec))
      if (has_extension(f.path(), src)) out.emplace_back().path = f.path().string();
    if (ec) MS_FAIL("cannot list ", dir_key, " '", src.directory, "': ", ec.message());
    std::sort(out.begin(), out.end(), [](const Video& a, const Video& b) { return a.path < b.path; });
    std::string extensions;
    for (const char* x : src.extensions) extensions += cat(extensions.empty() ? "" : " ", x);
    if (out.empty()) MS_FAIL(dir_key, " '", src.directory, "' holds no ", src.kind, " files (", extensions, ")");
    return out;
  }
  std::ifstream in(src.jsonl);
  if (!in) MS_FAIL(jsonl_key, " '", src.jsonl, "' (in ", name(), ") cannot be read");
  const fs::path base = fs::path(src.jsonl).parent_path();
  const std::string path_key = cat(src.kind, "_path");
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains(path_key) || !j[path_key].is_string() ||
        !j.contains("caption") || !j["caption"].is_string())
      MS_FAIL("'", src.jsonl, "' line ", n, ": expected {\"", path_key,
              "\": \"...\", \"caption\": \"...\"} (two strings)");
    const fs::path p = j[path_key].get<std::string>();
    Video& v = out.emplace_back();
    v.path = (p.is_absolute() ? p : base / p).lexically_normal().string();
    v.caption = j["caption"].get<std::string>();
  }
  if (out.empty()) MS_FAIL(jsonl_key, " '", src.jsonl, "' lists no ", src.kind, "s");
  return out;
}

VideoClips::VideoClips(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o)
    : ItemDataset(cat("dataset file '", file.path, "'"), o.on_bad_data == BadDataPolicy::fatal, o.seed) {
  constexpr double kModelFps = 16;  // Wan's frame rate, musubi-tuner's target for source_fps
  const auto wanted = [](int64_t value, int64_t requested) { return requested == 0 || value == requested; };
  int64_t other = 0;  // clips of sizes the requested extents leave out
  for (const DatasetEntry& e : entries) {
    const bool images = e.images();  // one frame each
    const FrameExtraction extraction =
        images ? FrameExtraction{"head", {1}}
               : FrameExtraction{e.frame_extraction, e.target_frames, e.frame_stride, e.frame_sample, e.max_frames};
    const int64_t batch = (o.batch_size > 0 ? o.batch_size : e.batch_size) * o.ranks;
    for (Video& v : list(e)) {
      try {
        if (!e.video_directory.empty() || !e.image_directory.empty()) {
          const std::string cap = fs::path(v.path).replace_extension(e.caption_extension).string();
          if (!fs::is_regular_file(cap)) MS_FAIL("'", v.path, "' has no caption file '", cap, "'");
          v.caption = trim(read_file(cap));
        }
        const VideoInfo info = probe_video(v.path);
        const bool drop = e.source_fps > 0 && !images;
        if (drop) v.frames = resampled_frames(info.frames, e.source_fps, kModelFps);
        const int64_t frames = drop ? int64_t(v.frames.size()) : info.frames;
        const std::vector<ClipRange> ranges = clip_ranges(extraction, frames);
        if (ranges.empty())
          MS_FAIL("'", v.path, "' is too short: ", frames, " frames", drop ? " at 16 fps" : "", ", its clips need ",
                  extraction.target_frames.front(), " or more");
        const Resolution r =
            bucket_resolution({info.width, info.height}, {e.width, e.height}, e.enable_bucket, e.bucket_no_upscale);
        v.width = info.width, v.height = info.height;
        v.cache_directory = e.cache_directory;
        v.image = images;
        videos_.push_back(std::move(v));
        for (const ClipRange& c : ranges) {
          const DataShape shape{3, c.length, r.height, r.width};
          if (!wanted(shape.frames, o.frames) || !wanted(shape.height, o.height) || !wanted(shape.width, o.width)) {
            ++other;
            continue;
          }
          clips_.push_back({int64_t(videos_.size()) - 1, c.start, shape});
          for (int64_t k = 0; k < e.num_repeats; ++k) add(int64_t(clips_.size()) - 1, shape, batch);
        }
      } catch (const Error& err) {
        bad(err.what());
      }
    }
  }
  if (other > 0)
    log_info(name(), ": ", other, " clips of other sizes than --frames/--height/--width ask for (", o.frames, "x",
             o.height, "x", o.width, ", 0: any) are left out");
  if (clips_.empty() && other > 0)
    MS_FAIL(name(), ": no clip has the requested size (--frames ", o.frames, " --height ", o.height, " --width ",
            o.width, "; 0: any); drop them to train on every clip size the file makes");
  finish_listing();
}

std::vector<VideoClips::ClipSource> VideoClips::sources() const {
  std::vector<ClipSource> out;
  for (const Clip& c : clips_) {
    const Video& v = videos_[size_t(c.video)];
    out.push_back({v.path, v.cache_directory, v.image, c.start, v.width, v.height, c.shape, v.caption});
  }
  return out;
}

DataSample VideoClips::load(int64_t item) {
  const Clip& c = clips_[size_t(item)];
  const Video& v = videos_[size_t(c.video)];
  const DataShape& s = c.shape;
  RgbVideo frames;
  if (v.frames.empty()) {
    frames = decode_video(v.path, c.start, s.frames);
  } else {  // the kept frames of the span, in order
    const int64_t first = v.frames[size_t(c.start)], last = v.frames[size_t(c.start + s.frames - 1)];
    const RgbVideo span = decode_video(v.path, first, last - first + 1);
    frames = {s.frames, span.height, span.width, span.fps,
              std::vector<uint8_t>(size_t(s.frames * span.height * span.width * 3))};
    for (int64_t k = 0; k < s.frames; ++k)
      std::copy_n(span.frame(v.frames[size_t(c.start + k)] - first), span.height * span.width * 3, frames.frame(k));
  }
  const std::vector<uint8_t> rgb = resize_crop(frames, {s.height, s.width});  // [F, H, W, 3]
  DataSample out;
  out.x0.resize(size_t(3 * s.frames * s.height * s.width));  // [3, F, H, W]
  rgb_to_model(rgb.data(), s.frames, s.height, s.width, out.x0.data());
  out.caption = v.caption;
  return out;
}

}  // namespace ms
