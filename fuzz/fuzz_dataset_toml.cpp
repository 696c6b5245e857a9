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
    for (const ms::DatasetEntry& e : f.datasets)
      if (e.target_frames > 0)
        ms::clip_starts(e.frame_extraction, 100, e.target_frames, e.frame_stride, e.frame_sample);
  } catch (const ms::Error&) {
  }
  return 0;
}
