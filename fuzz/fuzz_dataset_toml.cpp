// libFuzzer target: dataset TOML parsing on arbitrary text. Every input must either parse into
// entries (whose frame extraction is then exercised) or throw ms::Error.
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/log.h"
#include "data/dataset_toml.h"
#include "data/frame_extraction.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ms::set_log_level(ms::LogLevel::error);
  try {
    const ms::DatasetFile f =
        ms::parse_dataset_toml(std::string(reinterpret_cast<const char*>(data), size), "/fuzz/data.toml");
    for (const ms::DatasetEntry& e : f.datasets) {
      if (!e.target_frames.empty() || e.frame_extraction == "full")
        ms::clip_ranges({e.frame_extraction, e.target_frames, e.frame_stride, e.frame_sample, e.max_frames}, 100);
      if (e.source_fps > 0) ms::resampled_frames(100, e.source_fps, 16);
      if (e.width > 0 && e.height > 0)
        ms::bucket_resolution({1280, 720}, {e.width, e.height}, e.enable_bucket, e.bucket_no_upscale);
    }
  } catch (const ms::Error&) {
  }
  return 0;
}
