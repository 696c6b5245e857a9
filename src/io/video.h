// Video files in and out through FFmpeg's libraries (libavformat, libavcodec, libswscale).
// Every failure (missing file, unknown container, corrupt or truncated stream, no video stream,
// unwritable path) is an ms::Error naming the file and the problem; never a crash.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ms {

// Frames as 8-bit RGB, frame-major.
struct RgbVideo {
  int64_t frames = 0, height = 0, width = 0;
  double fps = 0;            // frames per second (0 when the container does not say)
  std::vector<uint8_t> rgb;  // [frames, height, width, 3]

  uint8_t* frame(int64_t f) { return rgb.data() + f * height * width * 3; }
  const uint8_t* frame(int64_t f) const { return rgb.data() + f * height * width * 3; }
};

struct VideoInfo {
  int64_t frames = 0;  // exact count of decodable frames (from a decode pass when the header does not say)
  int64_t height = 0, width = 0;
  double fps = 0;
};

// Header and stream probe without keeping pixels.
VideoInfo probe_video(const std::string& path);

// Decodes frames [first, first + count) (count < 0: to the end) at the file's own size.
// A stream that ends early is an error naming how many frames were decodable.
RgbVideo decode_video(const std::string& path, int64_t first = 0, int64_t count = -1);

// Decodes the frames one at a time, holding one: on_frame(rgb [height, width, 3], height, width) for each in order
// until it returns false. Returns the header (frames: how many were decoded). A stream that ends before the frame count
// its header promises is an error, as in decode_video.
VideoInfo stream_video(const std::string& path,
                       const std::function<bool(const uint8_t* rgb, int64_t height, int64_t width)>& on_frame);

// Writes `video` to `path`; the container and codec follow the extension: .mp4 (H.264, yuv420p),
// .webm (VP9), .mkv (H.264), .avi (MPEG-4 part 2), .gif (palette). fps <= 0 means 8.
// Odd widths/heights are padded by one pixel (repeating the last row/column) for the 4:2:0 codecs
// (all but .gif), so such a file decodes one pixel larger. Atomic: written to a
// temporary name in the same directory and renamed, so an existing file is never left half-written.
void encode_video(const std::string& path, const RgbVideo& video);

}  // namespace ms
