#include "data/frames.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "io/ffmpeg.h"

namespace ms {

Size2 cover_size(Size2 in, Size2 out) {
  MS_CHECK(in.height > 0 && in.width > 0 && out.height > 0 && out.width > 0, "cover_size: sizes must be positive");
  // Compare out.w / in.w with out.h / in.h exactly: the side with the larger ratio is matched.
  if (out.width * in.height >= out.height * in.width)
    return {std::max(out.height, (in.height * out.width + in.width / 2) / in.width), out.width};
  return {out.height, std::max(out.width, (in.width * out.height + in.height / 2) / in.height)};
}

std::vector<uint8_t> resize_crop(const RgbVideo& v, Size2 out) {
  const Size2 mid = cover_size({v.height, v.width}, out);
  const bool shrink = mid.height * mid.width < v.height * v.width;
  ff::SwsPtr sws;
  std::vector<uint8_t> scaled;  // [mid.height, mid.width, 3] one scaled frame
  if (mid.height != v.height || mid.width != v.width) {
    sws.reset(sws_getContext(int(v.width), int(v.height), AV_PIX_FMT_RGB24, int(mid.width), int(mid.height),
                             AV_PIX_FMT_RGB24, (shrink ? SWS_AREA : SWS_BILINEAR) | SWS_ACCURATE_RND, nullptr, nullptr,
                             nullptr));
    if (!sws) MS_FAIL("cannot resize ", v.width, "x", v.height, " frames to ", mid.width, "x", mid.height);
    scaled.resize(size_t(mid.height * mid.width * 3));
  }
  const int64_t y0 = (mid.height - out.height) / 2, x0 = (mid.width - out.width) / 2;
  std::vector<uint8_t> result(size_t(v.frames * out.height * out.width * 3));  // [frames, out.h, out.w, 3]
  for (int64_t f = 0; f < v.frames; ++f) {
    const uint8_t* src = v.frame(f);
    if (sws) {
      const uint8_t* in[1] = {src};
      const int in_stride[1] = {int(v.width * 3)};
      uint8_t* dst[1] = {scaled.data()};
      const int dst_stride[1] = {int(mid.width * 3)};
      sws_scale(sws.get(), in, in_stride, 0, int(v.height), dst, dst_stride);
      src = scaled.data();
    }
    for (int64_t y = 0; y < out.height; ++y)
      std::memcpy(result.data() + ((f * out.height + y) * out.width) * 3, src + ((y0 + y) * mid.width + x0) * 3,
                  size_t(out.width * 3));
  }
  return result;
}

void rgb_to_model(const uint8_t* rgb, int64_t frames, int64_t height, int64_t width, float* out) {
  const int64_t plane = frames * height * width;
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) out[c * plane + i] = float(rgb[i * 3 + c]) / 127.5f - 1.0f;
}

}  // namespace ms
