// Video encoding: container and codec by extension, atomic write (the decoder is video.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

extern "C" {
#include <libavutil/opt.h>
}

#include "core/check.h"
#include "io/atomic_file.h"
#include "io/ffmpeg.h"
#include "io/gif_palette.h"
#include "io/video.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

struct Format {
  const char* ext;
  const char* muxer;
  std::vector<const char*> encoders;  // first one this FFmpeg has wins
  AVPixelFormat pix;
};

const std::vector<Format>& formats() {
  static const std::vector<Format> f = {
      {".mp4", "mp4", {"libx264", "mpeg4"}, AV_PIX_FMT_YUV420P},
      {".mkv", "matroska", {"libx264", "mpeg4"}, AV_PIX_FMT_YUV420P},
      {".webm", "webm", {"libvpx-vp9", "libvpx"}, AV_PIX_FMT_YUV420P},
      {".avi", "avi", {"mpeg4"}, AV_PIX_FMT_YUV420P},
      {".gif", "gif", {"gif"}, AV_PIX_FMT_PAL8},
  };
  return f;
}

const Format& format_for(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const Format& f : formats())
    if (ext == f.ext) return f;
  MS_FAIL("cannot write video '", path, "': unknown extension '", ext, "'; use .mp4, .webm, .mkv, .avi or .gif");
}

// Quality settings: visually near-lossless, fast (clips are small).
void tune(AVCodecContext* c, const std::string& encoder) {
  if (encoder == "libx264") {
    av_opt_set(c->priv_data, "preset", "veryfast", 0);
    av_opt_set(c->priv_data, "crf", "16", 0);
  } else if (encoder == "libvpx-vp9" || encoder == "libvpx") {
    c->bit_rate = 0;
    av_opt_set(c->priv_data, "crf", "16", 0);
    av_opt_set(c->priv_data, "deadline", "realtime", 0);
    av_opt_set(c->priv_data, "cpu-used", "8", 0);
  } else if (encoder == "mpeg4") {
    c->flags |= AV_CODEC_FLAG_QSCALE;
    c->global_quality = FF_QP2LAMBDA * 2;
  }
}

// Removes the temporary file unless the write was committed.
struct TempFile {
  std::string path;
  bool committed = false;
  ~TempFile() {
    if (!committed) ::unlink(path.c_str());
  }
};

class Writer {
 public:
  Writer(const std::string& path, const std::string& tmp, const Format& fmt, const RgbVideo& v) : path_(path) {
    AVFormatContext* raw = nullptr;
    int r = avformat_alloc_output_context2(&raw, nullptr, fmt.muxer, tmp.c_str());
    if (r < 0 || !raw) fail(cat("no ", fmt.muxer, " muxer in this FFmpeg"), r);
    out_.reset(raw);
    for (const char* name : fmt.encoders)
      if ((encoder_ = avcodec_find_encoder_by_name(name))) break;
    if (!encoder_) fail(cat("no encoder for ", fmt.ext, " in this FFmpeg (tried ", fmt.encoders[0], ")"));
    // 4:2:0 chroma covers 2x2 pixels: x264 and MPEG-4 refuse odd sides, libvpx smears the last column.
    const bool even = fmt.pix == AV_PIX_FMT_YUV420P;
    width_ = v.width + (even ? v.width % 2 : 0);
    height_ = v.height + (even ? v.height % 2 : 0);
    codec_.reset(avcodec_alloc_context3(encoder_));
    if (!codec_) fail("out of memory");
    const AVRational fps = av_d2q(v.fps > 0 ? v.fps : 8.0, 100000);
    codec_->width = int(width_);
    codec_->height = int(height_);
    codec_->pix_fmt = fmt.pix;
    codec_->time_base = av_inv_q(fps);
    codec_->framerate = fps;
    codec_->thread_count = 1;
    if (out_->oformat->flags & AVFMT_GLOBALHEADER) codec_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    tune(codec_.get(), encoder_->name);
    r = avcodec_open2(codec_.get(), encoder_, nullptr);
    if (r < 0) fail(cat("cannot open the ", encoder_->name, " encoder at ", width_, "x", height_), r);
    stream_ = avformat_new_stream(out_.get(), nullptr);
    if (!stream_) fail("out of memory");
    r = avcodec_parameters_from_context(stream_->codecpar, codec_.get());
    if (r < 0) fail("bad stream parameters", r);
    stream_->time_base = codec_->time_base;
    stream_->avg_frame_rate = fps;  // Matroska writes it as the default frame duration
    r = avio_open(&out_->pb, tmp.c_str(), AVIO_FLAG_WRITE);
    if (r < 0) fail("cannot create the file (does the directory exist and is it writable?)", r);
    r = avformat_write_header(out_.get(), nullptr);
    if (r < 0) fail("cannot write the container header", r);
    frame_ = ff::make_frame();
    frame_->format = fmt.pix;
    frame_->width = int(width_);
    frame_->height = int(height_);
    r = av_frame_get_buffer(frame_.get(), 0);
    if (r < 0) fail("out of memory for a frame", r);
    pkt_ = ff::make_packet();
  }

  // Sends one padded RGB frame [height_, width_, 3] as frame number `index`.
  void send_yuv(const uint8_t* rgb, int64_t index) {
    sws_.reset(sws_getCachedContext(sws_.release(), int(width_), int(height_), AV_PIX_FMT_RGB24, int(width_),
                                    int(height_), codec_->pix_fmt, SWS_BILINEAR | SWS_ACCURATE_RND, nullptr, nullptr,
                                    nullptr));
    if (!sws_) fail("cannot convert RGB to the encoder's pixel format");
    writable();
    const uint8_t* src[1] = {rgb};
    const int stride[1] = {int(width_ * 3)};
    sws_scale(sws_.get(), src, stride, 0, int(height_), frame_->data, frame_->linesize);
    send(index);
  }

  // Sends one frame of palette indices [height_, width_] as frame number `index`.
  void send_indexed(const uint8_t* idx, const std::array<uint32_t, 256>& argb, int64_t index) {
    writable();
    for (int64_t y = 0; y < height_; ++y)
      std::memcpy(frame_->data[0] + y * frame_->linesize[0], idx + y * width_, size_t(width_));
    std::memcpy(frame_->data[1], argb.data(), AVPALETTE_SIZE);
    send(index);
  }

  // Flushes the encoder and writes the trailer; the file is complete on return.
  void finish() {
    int r = avcodec_send_frame(codec_.get(), nullptr);
    if (r < 0) fail("cannot flush the encoder", r);
    write_packets();
    r = av_write_trailer(out_.get());
    if (r < 0) fail("cannot finish the container", r);
    r = avio_closep(&out_->pb);
    if (r < 0) fail("cannot close the file", r);
  }

  int64_t width() const { return width_; }
  int64_t height() const { return height_; }

 private:
  [[noreturn]] void fail(const std::string& what, int code = 0) const {
    MS_FAIL("cannot write video '", path_, "': ", what, code < 0 ? ": " + ff::error_text(code) : "");
  }

  void writable() {
    const int r = av_frame_make_writable(frame_.get());
    if (r < 0) fail("out of memory for a frame", r);
  }

  void send(int64_t index) {
    frame_->pts = index;
    frame_->quality = codec_->global_quality;
    const int r = avcodec_send_frame(codec_.get(), frame_.get());
    if (r < 0) fail("the encoder refused a frame", r);
    write_packets();
  }

  void write_packets() {
    for (;;) {
      int r = avcodec_receive_packet(codec_.get(), pkt_.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) fail("encoding failed", r);
      if (pkt_->duration <= 0) pkt_->duration = 1;  // one frame: lets containers know the last frame's length
      av_packet_rescale_ts(pkt_.get(), codec_->time_base, stream_->time_base);
      pkt_->stream_index = stream_->index;
      r = av_interleaved_write_frame(out_.get(), pkt_.get());  // takes the packet's reference
      if (r < 0) fail("cannot write to the file (disk full?)", r);
    }
  }

  std::string path_;
  ff::OutputPtr out_;
  const AVCodec* encoder_ = nullptr;
  ff::CodecPtr codec_;
  AVStream* stream_ = nullptr;  // owned by out_
  ff::FramePtr frame_;
  ff::PacketPtr pkt_;
  ff::SwsPtr sws_;
  int64_t width_ = 0, height_ = 0;  // encoded size: the video's, padded to even where the codec needs it
};

// Copies frame f [h, w, 3] into dst [H, W, 3] (H >= h, W >= w), repeating the last row and column.
void pad_frame(const uint8_t* f, int64_t h, int64_t w, int64_t H, int64_t W, uint8_t* dst) {
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = f + std::min(y, h - 1) * w * 3;
    std::memcpy(dst + y * W * 3, row, size_t(w * 3));
    for (int64_t x = w; x < W; ++x) std::memcpy(dst + (y * W + x) * 3, row + (w - 1) * 3, 3);
  }
}

}  // namespace

void encode_video(const std::string& path, const RgbVideo& video) {
  ff::quiet_logs();
  const Format& fmt = format_for(path);
  if (video.frames <= 0 || video.height <= 0 || video.width <= 0 || video.height > ff::kMaxSide ||
      video.width > ff::kMaxSide)
    MS_FAIL("cannot write video '", path, "': ", video.frames, " frames of ", video.width, "x", video.height,
            " (need at least one frame, sides 1..", ff::kMaxSide, ")");
  MS_CHECK(int64_t(video.rgb.size()) == video.frames * video.height * video.width * 3, "encode_video: rgb holds ",
           video.rgb.size(), " bytes, expected frames*height*width*3");
  TempFile tmp{path + ".tmp-" + std::to_string(::getpid())};
  Writer w(path, tmp.path, fmt, video);
  if (fmt.pix == AV_PIX_FMT_PAL8) {
    const GifPalette palette(video.rgb.data(), video.frames * video.height * video.width);
    std::vector<uint8_t> idx(size_t(video.height * video.width));  // [height, width] palette indices
    for (int64_t f = 0; f < video.frames; ++f) {
      palette.map(video.frame(f), video.height * video.width, idx.data());
      w.send_indexed(idx.data(), palette.argb(), f);
    }
  } else {
    std::vector<uint8_t> padded(size_t(w.height() * w.width() * 3));  // [H, W, 3] even-padded frame
    for (int64_t f = 0; f < video.frames; ++f) {
      pad_frame(video.frame(f), video.height, video.width, w.height(), w.width(), padded.data());
      w.send_yuv(padded.data(), f);
    }
  }
  w.finish();
  const int fd = ::open(tmp.path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    MS_FAIL("cannot write video '", path, "': ", std::strerror(errno));
  }
  ::close(fd);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    MS_FAIL("cannot replace video '", path, "': ", std::strerror(errno));
  tmp.committed = true;
  const fs::path parent = fs::path(path).parent_path();
  fsync_dir(parent.empty() ? "." : parent.string());
}

}  // namespace ms
