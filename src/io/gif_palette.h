// A 256-colour palette for a whole clip, for the GIF writer: exact when the clip has at most 256
// distinct colours, otherwise median cut over a 5-bit-per-channel histogram.
#pragma once
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ms {

class GifPalette {
 public:
  // rgb [pixels, 3]: every frame of the clip.
  GifPalette(const uint8_t* rgb, int64_t pixels);

  // 256 entries, 0xAARRGGBB, opaque (FFmpeg's AVPALETTE layout); unused entries are black.
  const std::array<uint32_t, 256>& argb() const { return argb_; }
  // out [pixels]: the palette index of each pixel (exact, or its nearest palette colour).
  void map(const uint8_t* rgb, int64_t pixels, uint8_t* out) const;

 private:
  std::array<uint32_t, 256> argb_{};
  std::unordered_map<uint32_t, uint8_t> exact_;  // 0xRRGGBB -> index, when the clip has <= 256 colours
  std::vector<std::array<uint8_t, 3>> colours_;  // [<=256] median-cut colours, otherwise
};

}  // namespace ms
