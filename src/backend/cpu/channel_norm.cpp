// The VAE's channel RMS norm (+ SiLU) (ops/channel_norm.h) in Highway vectors along the pixels, compiled for every
// target by foreach_target and picked at run time. A chunk of pixels at a time: the sum of squares over the channel
// planes, then one pass that scales (and gates) each plane, so the frame is read twice and written once.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/channel_norm.cpp"
#include "ops/channel_norm.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/vector_map-inl.h"  // per target, included again like this file

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace {

constexpr int64_t kPixels = 512;  // pixels per chunk: its scale row stays in L1

template <class T>
void Forward(const T* x, const T* gamma, T* y, int64_t C, int64_t N, bool silu) {
  const hn::ScalableTag<T> d;
  const T root_c = T(std::sqrt(double(C)));
  parallel_chunks(N, kPixels, 2 * kPixels, [&](int64_t p0, int64_t p1) {
    HWY_ALIGN T scale[kPixels] = {};
    const int64_t n = p1 - p0;
    for (int64_t c = 0; c < C; ++c)
      map_vectors(
          d, n, scale, [&](auto, auto s, auto v) { return hn::MulAdd(v, v, s); }, scale, x + c * N + p0);
    map_vectors(
        d, n, scale,
        [&](auto, auto s) {  // sqrt(C) / max(||x||, 1e-12)
          return hn::Div(hn::Set(d, root_c), hn::Max(hn::Sqrt(s), hn::Set(d, T(1e-12))));
        },
        scale);
    for (int64_t c = 0; c < C; ++c) {
      const auto g = hn::Set(d, gamma[c]);
      map_vectors(
          d, n, y + c * N + p0,
          [&](auto, auto v, auto s) {
            const auto h = hn::Mul(hn::Mul(v, s), g);
            if (!silu) return h;
            const auto e = exp_vector(d, h, hn::Set(d, T(-1)), hn::Zero(d));  // h sigmoid(h) = h / (1 + e^-h)
            return hn::Div(h, hn::Add(hn::Set(d, T(1)), e));
          },
          x + c * N + p0, scale);
    }
  });
}

}  // namespace

void ChannelRmsNormF(const ChannelNormParams<float>& p) { Forward(p.x, p.gamma, p.y, p.C, p.N, p.silu); }
void ChannelRmsNormD(const ChannelNormParams<double>& p) { Forward(p.x, p.gamma, p.y, p.C, p.N, p.silu); }

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms::cpu {

HWY_EXPORT(ChannelRmsNormF);
HWY_EXPORT(ChannelRmsNormD);

template <>
void channel_rms_norm_forward<float>(const ChannelNormParams<float>& p) {
  HWY_DYNAMIC_DISPATCH(ChannelRmsNormF)(p);
}
template <>
void channel_rms_norm_forward<double>(const ChannelNormParams<double>& p) {
  HWY_DYNAMIC_DISPATCH(ChannelRmsNormD)(p);
}

}  // namespace ms::cpu
#endif  // HWY_ONCE
