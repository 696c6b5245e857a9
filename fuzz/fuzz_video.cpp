// libFuzzer target: arbitrary bytes as a video file for probe_video and decode_video. Every input
// must either decode or throw ms::Error; no crash, no leak, no sanitizer report.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/check.h"
#include "io/video.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/fuzz_video-" + std::to_string(::getpid()) + ".bin";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const ms::VideoInfo info = ms::probe_video(path);
    if (info.width * info.height <= (1 << 20)) ms::decode_video(path, 0, std::min<int64_t>(info.frames, 16));
  } catch (const ms::Error&) {
  }
  ::unlink(path.c_str());
  return 0;
}
