// The offset squashing of the DSA offset network (ops/dsa.h: dsa_offsets_forward, dsa_offsets_backward) in Highway
// vectors, compiled for every target by foreach_target and picked at run time (scalar std::tanh calls were a visible
// share of the DSA training job: docs/benchmarks.md). The forward is range * Tanh (contrib/math, within 4 ulp); the
// backward's 1 - tanh^2 is taken as 4 e / (1 + e)^2, e = exp(-2 |x|), which keeps its relative accuracy where tanh
// saturates (1 - t^2 cancels there). NaN stays NaN.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/dsa_offsets.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <array>
#include <vector>

#include "backend/cpu/vector_map-inl.h"  // per target, included again like this file
#include "ops/dsa.h"

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace {

// Elements per parallel task: whole (t, h, w) triples, so that every chunk starts on axis t and reads the same
// [chunk] pattern of per-axis ranges.
constexpr int64_t kChunk = 3 << 10;
constexpr int64_t kMinParallel = 1 << 13;  // elements below which threads cost more than they save (tanh ~ 20 flops)

// [kChunk] range[i % 3]: the scale of element i of a chunk.
template <class T>
std::vector<T> range_pattern(const std::array<double, 3>& range) {
  std::vector<T> r(static_cast<size_t>(kChunk));
  for (size_t i = 0; i < r.size(); ++i) r[i] = T(range[i % 3]);
  return r;
}

template <class T>
void Forward(const T* raw, T* offsets, const std::array<double, 3>& range, int64_t n) {  // range * tanh(raw)
  const hn::ScalableTag<T> d;
  const std::vector<T> scale = range_pattern<T>(range);
  parallel_chunks(n, kChunk, kMinParallel, [&](int64_t i0, int64_t i1) {
    map_vectors(
        d, i1 - i0, offsets + i0,
        [&](auto, auto x, auto r) { return hn::IfThenElse(hn::IsNaN(x), x, hn::Mul(r, hn::Tanh(d, x))); }, raw + i0,
        scale.data());
  });
}

template <class T>
void Backward(const T* raw, const T* doffsets, T* draw, const std::array<double, 3>& range, int64_t n) {
  const hn::ScalableTag<T> d;
  const std::vector<T> scale = range_pattern<T>(range);
  parallel_chunks(n, kChunk, kMinParallel, [&](int64_t i0, int64_t i1) {
    map_vectors(
        d, i1 - i0, draw + i0,
        [&](auto, auto x, auto g, auto r) {  // g range 4e / (1 + e)^2
          const auto e = exp_vector(d, hn::Abs(x), hn::Set(d, T(-2)), hn::Zero(d)), e1 = hn::Add(hn::Set(d, T(1)), e);
          return hn::Mul(hn::Mul(g, r), hn::Div(hn::Mul(hn::Set(d, T(4)), e), hn::Mul(e1, e1)));
        },
        raw + i0, doffsets + i0, scale.data());
  });
}

}  // namespace

#define MS_TARGET_ENTRIES(T, S)                                                                              \
  void OffsetsForward##S(const DsaOffsetsParams<T>& p) { Forward(p.raw, p.offsets, p.range, p.N* p.M * 3); } \
  void OffsetsBackward##S(const DsaOffsetsParams<T>& p) { Backward(p.raw, p.doffsets, p.draw, p.range, p.N* p.M * 3); }
MS_TARGET_ENTRIES(float, F)
MS_TARGET_ENTRIES(double, D)
#undef MS_TARGET_ENTRIES

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms::cpu {

#define MS_DISPATCH(T, S)                                      \
  HWY_EXPORT(OffsetsForward##S);                               \
  HWY_EXPORT(OffsetsBackward##S);                              \
  template <>                                                  \
  void dsa_offsets_forward<T>(const DsaOffsetsParams<T>& p) {  \
    HWY_DYNAMIC_DISPATCH(OffsetsForward##S)(p);                \
  }                                                            \
  template <>                                                  \
  void dsa_offsets_backward<T>(const DsaOffsetsParams<T>& p) { \
    HWY_DYNAMIC_DISPATCH(OffsetsBackward##S)(p);               \
  }
MS_DISPATCH(float, F)
MS_DISPATCH(double, D)
#undef MS_DISPATCH

}  // namespace ms::cpu
#endif  // HWY_ONCE
