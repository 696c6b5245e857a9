// adamw_update: the fused AdamW pass as a Highway kernel, compiled for every target by foreach_target
// and picked at run time (HWY_DYNAMIC_DISPATCH). The op order is the one documented in adamw.h; this
// file is built with -ffp-contract=off so no Mul+Add pair becomes an FMA and every target stays
// bit-identical to adamw_update_reference.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "train/adamw_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "core/parallel.h"
#include "train/adamw.h"

HWY_BEFORE_NAMESPACE();
namespace ms::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f32_to_bf16 on a vector: round to nearest even, NaN -> (bits >> 16) | 0x40 (quiet).
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> to_bf16(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto u = hn::BitCast(du, x);
  const auto hi = hn::ShiftRight<16>(u);
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
  const auto quiet_nan = hn::Or(hi, hn::Set(du, 0x40u));
  // |x| bits > 0x7f800000: both sides lie in [0, 2^31), so the signed compare is exact.
  const auto is_nan = hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))), hn::Set(di, 0x7f800000));
  const auto bits = hn::IfThenElse(hn::RebindMask(du, is_nan), quiet_nan, rounded);
  return hn::DemoteTo(hn::Rebind<uint16_t, DF>(), hn::BitCast(di, bits));  // values <= 0xffff: no saturation
}

// One vector of Lanes(df) elements at the given pointers, in adamw.h's op order.
template <class DF>
HWY_INLINE void update_vector(DF df, const AdamWScalars& s, const float* HWY_RESTRICT grad, float* HWY_RESTRICT master,
                              float* HWY_RESTRICT m, float* HWY_RESTRICT v, uint16_t* HWY_RESTRICT weights) {
  using hn::Add, hn::Div, hn::Mul, hn::Set, hn::Sub;
  const auto g = Mul(hn::LoadU(df, grad), Set(df, s.grad_scale));
  const auto p = Mul(hn::LoadU(df, master), Set(df, s.decay));
  const auto m1 = Add(Mul(Set(df, s.b1), hn::LoadU(df, m)), Mul(Set(df, s.c1), g));
  const auto v1 = Add(Mul(Set(df, s.b2), hn::LoadU(df, v)), Mul(Mul(Set(df, s.c2), g), g));
  const auto d = Add(Div(hn::Sqrt(v1), Set(df, s.sqrt_bc2)), Set(df, s.eps));
  const auto p1 = Sub(p, Div(Mul(Set(df, s.step_size), m1), d));
  hn::StoreU(m1, df, m);
  hn::StoreU(v1, df, v);
  hn::StoreU(p1, df, master);
  hn::StoreU(to_bf16(df, p1), hn::Rebind<uint16_t, DF>(), weights);
}

// Updates elements [0, n) of the given arrays. s by value: its constants stay in registers instead of being
// reloaded after every store.
void AdamWSpan(const AdamWScalars s, const float* HWY_RESTRICT grad, float* HWY_RESTRICT master, float* HWY_RESTRICT m,
               float* HWY_RESTRICT v, uint16_t* HWY_RESTRICT weights, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) update_vector(df, s, grad + i, master + i, m + i, v + i, weights + i);
  const size_t rest = n - i;
  if (rest == 0) return;
  // The last partial vector goes through the same code on zero-padded copies [kMaxLanes >= lanes].
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  float tg[kMaxLanes] = {}, tp[kMaxLanes] = {}, tm[kMaxLanes] = {}, tv[kMaxLanes] = {};
  uint16_t tw[kMaxLanes];
  std::copy_n(grad + i, rest, tg);
  std::copy_n(master + i, rest, tp);
  std::copy_n(m + i, rest, tm);
  std::copy_n(v + i, rest, tv);
  update_vector(df, s, tg, tp, tm, tv, tw);
  std::copy_n(tp, rest, master + i);
  std::copy_n(tm, rest, m + i);
  std::copy_n(tv, rest, v + i);
  std::copy_n(tw, rest, weights + i);
}

int64_t TargetOfAdamW() { return HWY_TARGET; }

}  // namespace ms::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms {

HWY_EXPORT(AdamWSpan);
HWY_EXPORT(TargetOfAdamW);

void adamw_update(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad, float* master,
                  float* m, float* v, uint16_t* weights, int64_t n) {
  constexpr int64_t kChunk = 1 << 15;  // elements per task: 30 bytes each, ~1 MB of traffic
  const AdamWScalars s = adamw_scalars(c, lr, t, grad_scale);
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t b = chunk * kChunk;
    const size_t count = size_t(std::min(kChunk, n - b));
    HWY_DYNAMIC_DISPATCH(AdamWSpan)(s, grad + b, master + b, m + b, v + b, weights + b, count);
  });
}

const char* adamw_simd_target() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(TargetOfAdamW)()); }

}  // namespace ms
#endif  // HWY_ONCE
