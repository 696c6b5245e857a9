#include "io/ffmpeg.h"

#include <mutex>

#include "core/check.h"

namespace ms::ff {

FramePtr make_frame() {
  FramePtr f(av_frame_alloc());
  if (!f) MS_FAIL("out of memory allocating a video frame");
  return f;
}

PacketPtr make_packet() {
  PacketPtr p(av_packet_alloc());
  if (!p) MS_FAIL("out of memory allocating a video packet");
  return p;
}

std::string error_text(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

void quiet_logs() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_level(AV_LOG_QUIET); });
}

}  // namespace ms::ff
