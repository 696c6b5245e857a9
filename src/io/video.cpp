// Video decoding and probing (the encoder is video_encode.cpp).
#include "io/video.h"

#include <filesystem>

#include "core/check.h"
#include "io/ffmpeg.h"

namespace ms {
namespace {

constexpr int64_t kMaxDecodedBytes = int64_t(8) << 30;  // one decode_video call's RGB output
constexpr const char* kDemuxers =
    "mov,matroska,avi,gif,mpegts,flv,mpeg,ogg,asf,ivf,h264,hevc,m4v,mjpeg,yuv4mpegpipe,wav,png_pipe,jpeg_pipe,"
    "webp_pipe,bmp_pipe";

double rate(AVRational r) { return r.num > 0 && r.den > 0 ? av_q2d(r) : 0.0; }

// An open input file and the decoder of its best video stream.
class Decoder {
 public:
  explicit Decoder(const std::string& path) : path_(path) {
    ff::quiet_logs();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) MS_FAIL("video '", path, "' does not exist");
    if (std::filesystem::is_directory(path, ec)) MS_FAIL("video '", path, "' is a directory, not a video file");
    // Local files and plain containers only (and single images through the png, jpeg, webp and bmp pipe demuxers):
    // playlist-style demuxers (hls, concat, image2) would open other files or URLs that a crafted "video" names.
    AVDictionary* opts = nullptr;
    av_dict_set(&opts, "protocol_whitelist", "file", 0);
    av_dict_set(&opts, "format_whitelist", kDemuxers, 0);
    AVFormatContext* raw = nullptr;
    int r = avformat_open_input(&raw, path.c_str(), nullptr, &opts);  // frees raw itself on failure
    av_dict_free(&opts);
    if (r < 0) MS_FAIL("cannot open video '", path, "': ", ff::error_text(r), " (not a video, or a damaged file)");
    fmt_.reset(raw);
    r = avformat_find_stream_info(fmt_.get(), nullptr);
    if (r < 0) MS_FAIL("cannot read the streams of '", path, "': ", ff::error_text(r), " (corrupt or truncated file)");
    const AVCodec* codec = nullptr;
    stream_ = av_find_best_stream(fmt_.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream_ == AVERROR_STREAM_NOT_FOUND) MS_FAIL("'", path, "' has no video stream");
    if (stream_ < 0 || !codec) MS_FAIL("'", path, "': this FFmpeg has no decoder for its video stream");
    const AVStream* st = fmt_->streams[stream_];
    width_ = st->codecpar->width;
    height_ = st->codecpar->height;
    if (width_ <= 0 || height_ <= 0 || width_ > ff::kMaxSide || height_ > ff::kMaxSide)
      MS_FAIL("'", path, "': video frame size ", width_, "x", height_, " is not usable (each side must be 1..",
              ff::kMaxSide, ")");
    fps_ = rate(st->avg_frame_rate) > 0 ? rate(st->avg_frame_rate) : rate(st->r_frame_rate);
    header_frames_ = std::max<int64_t>(0, st->nb_frames);
    codec_.reset(avcodec_alloc_context3(codec));
    if (!codec_) MS_FAIL("out of memory opening a decoder for '", path, "'");
    r = avcodec_parameters_to_context(codec_.get(), st->codecpar);
    if (r < 0) MS_FAIL("'", path, "': bad video stream parameters: ", ff::error_text(r));
    codec_->thread_count = 1;
    r = avcodec_open2(codec_.get(), codec, nullptr);
    if (r < 0) MS_FAIL("cannot open the ", codec->name, " decoder for '", path, "': ", ff::error_text(r));
  }

  const std::string& path() const { return path_; }
  int64_t width() const { return width_; }
  int64_t height() const { return height_; }
  double fps() const { return fps_; }
  int64_t header_frames() const { return header_frames_; }  // 0: the container does not say

  // Calls on_frame(frame, index) for each decoded frame in order until it returns false or the
  // stream ends; returns the number of frames decoded. Any demuxing or decoding error throws.
  template <class F>
  int64_t for_each_frame(F&& on_frame) {
    ff::PacketPtr pkt = ff::make_packet();
    ff::FramePtr frame = ff::make_frame();
    int64_t index = 0;
    auto drain = [&] {  // false: on_frame asked to stop
      for (;;) {
        const int r = avcodec_receive_frame(codec_.get(), frame.get());
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return true;
        if (r < 0) corrupt(index, r);
        if (frame->width != width_ || frame->height != height_)
          MS_FAIL("'", path_, "': frame ", index, " is ", frame->width, "x", frame->height, " but the stream says ",
                  width_, "x", height_, " (corrupt file, or a size change mid-stream, which is not supported)");
        const bool more = on_frame(*frame, index++);
        av_frame_unref(frame.get());
        if (!more) return false;
      }
    };
    for (;;) {
      int r = av_read_frame(fmt_.get(), pkt.get());
      if (r == AVERROR_EOF) break;
      if (r < 0) corrupt(index, r);
      if (pkt->stream_index == stream_) {
        r = avcodec_send_packet(codec_.get(), pkt.get());
        av_packet_unref(pkt.get());
        if (r < 0) corrupt(index, r);
        if (!drain()) return index;
      } else {
        av_packet_unref(pkt.get());
      }
    }
    const int r = avcodec_send_packet(codec_.get(), nullptr);  // flush delayed frames
    if (r < 0 && r != AVERROR_EOF) corrupt(index, r);
    drain();
    return index;
  }

 private:
  [[noreturn]] void corrupt(int64_t frames_done, int code) const {
    MS_FAIL("'", path_, "': corrupt or truncated video data after ", frames_done, " frames: ", ff::error_text(code));
  }

  std::string path_;
  ff::InputPtr fmt_;
  ff::CodecPtr codec_;
  int stream_ = -1;
  int64_t width_ = 0, height_ = 0, header_frames_ = 0;
  double fps_ = 0;
};

}  // namespace

VideoInfo probe_video(const std::string& path) {
  Decoder d(path);
  VideoInfo info{d.header_frames(), d.height(), d.width(), d.fps()};
  if (info.frames == 0) info.frames = d.for_each_frame([](const AVFrame&, int64_t) { return true; });
  if (info.frames == 0) MS_FAIL("'", path, "' has no decodable video frames");
  return info;
}

namespace {

// Decodes frames from `first` on, converted to RGB into a buffer of one frame, while on_frame(rgb) returns
// true; `wanted` frames (0: all the header promises) must be decodable unless on_frame stops first. Returns the
// number on_frame received.
int64_t decode_rgb(Decoder& d, int64_t first, int64_t wanted, const std::function<bool(const uint8_t* rgb)>& on_frame) {
  std::vector<uint8_t> rgb(size_t(d.height() * d.width() * 3));  // [height, width, 3]
  ff::SwsPtr sws;
  int64_t delivered = 0;
  bool caller_stopped = false;
  const int64_t decoded = d.for_each_frame([&](const AVFrame& f, int64_t i) {
    if (i < first) return true;
    // Reuses the context while the source format stays the same; frees it otherwise.
    sws.reset(sws_getCachedContext(sws.release(), f.width, f.height, AVPixelFormat(f.format), f.width, f.height,
                                   AV_PIX_FMT_RGB24, SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr,
                                   nullptr, nullptr));
    if (!sws) MS_FAIL("'", d.path(), "': cannot convert its pixel format (", f.format, ") to RGB");
    uint8_t* dst[1] = {rgb.data()};
    const int dst_stride[1] = {int(d.width() * 3)};
    sws_scale(sws.get(), f.data, f.linesize, 0, f.height, dst, dst_stride);
    ++delivered;
    if (!on_frame(rgb.data())) {
      caller_stopped = true;
      return false;
    }
    return wanted <= 0 || delivered < wanted;
  });
  // Frames the caller asked for: `wanted`, or (to the end) all the header promises.
  const int64_t need = wanted > 0 ? wanted : std::max<int64_t>(1, d.header_frames() - first);
  if (delivered < need && !caller_stopped)
    MS_FAIL("'", d.path(), "' ended after ", decoded, " decodable frames but frames [", first, ", ", first + need,
            ") were requested",
            d.header_frames() > 0 ? cat(" (its header says ", d.header_frames(), "; the file is truncated or corrupt)")
                                  : std::string(" (too short, truncated or corrupt)"));
  return delivered;
}

}  // namespace

RgbVideo decode_video(const std::string& path, int64_t first, int64_t count) {
  MS_CHECK(first >= 0, "decode_video: first frame must be >= 0, got ", first);
  Decoder d(path);
  RgbVideo v;
  v.height = d.height();
  v.width = d.width();
  v.fps = d.fps();
  const int64_t frame_bytes = v.height * v.width * 3;
  if (count == 0) return v;
  decode_rgb(d, first, count < 0 ? 0 : count, [&](const uint8_t* rgb) {
    if (int64_t(v.rgb.size()) + frame_bytes > kMaxDecodedBytes)
      MS_FAIL("'", path, "': decoding more than ", kMaxDecodedBytes >> 30, " GiB of frames; request fewer frames");
    v.rgb.insert(v.rgb.end(), rgb, rgb + frame_bytes);  // [frames, height, width, 3]
    ++v.frames;
    return true;
  });
  return v;
}

VideoInfo stream_video(const std::string& path,
                       const std::function<bool(const uint8_t* rgb, int64_t height, int64_t width)>& on_frame) {
  Decoder d(path);
  VideoInfo info{0, d.height(), d.width(), d.fps()};
  info.frames = decode_rgb(d, 0, 0, [&](const uint8_t* rgb) { return on_frame(rgb, info.height, info.width); });
  return info;
}

}  // namespace ms
