// RAII owners for FFmpeg objects and error text, shared by the video decoder and encoder.
// Every object is freed on every path (exceptions included) by its unique_ptr.
#pragma once
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

namespace ms::ff {

struct InputDeleter {
  void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
};
// An output context owns its AVIOContext when the muxer writes a file.
struct OutputDeleter {
  void operator()(AVFormatContext* c) const {
    if (c->pb && !(c->oformat->flags & AVFMT_NOFILE)) avio_closep(&c->pb);
    avformat_free_context(c);
  }
};
struct CodecDeleter {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsDeleter {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

using InputPtr = std::unique_ptr<AVFormatContext, InputDeleter>;
using OutputPtr = std::unique_ptr<AVFormatContext, OutputDeleter>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDeleter>;

// av_frame_alloc / av_packet_alloc that throw ms::Error instead of returning null.
FramePtr make_frame();
PacketPtr make_packet();

// FFmpeg's text for an AVERROR code.
std::string error_text(int code);

// Silences FFmpeg's own stderr messages (our errors name the file and problem); idempotent.
void quiet_logs();

// Largest frame side we accept from a file or write (FFmpeg's own limit is larger).
constexpr int kMaxSide = 16384;

}  // namespace ms::ff
