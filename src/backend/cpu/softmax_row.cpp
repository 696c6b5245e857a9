// row_max and exp_affine (backend/cpu/softmax_row.h), compiled for every target by foreach_target and picked at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/softmax_row.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// The per-target math header: included again for each target, like this file.
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/softmax_row.h"

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(a x + b) of one vector, with Exp's range completed: NaN stays NaN, above `top` (the log of the largest
// finite value) +inf.
template <class D>
HWY_INLINE hn::Vec<D> exp_vector(D d, hn::Vec<D> x, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> top) {
  const auto arg = hn::MulAdd(a, x, b);
  const auto inf = hn::Set(d, std::numeric_limits<hn::TFromD<D>>::infinity());
  return hn::IfThenElse(hn::IsNaN(arg), arg, hn::IfThenElse(hn::Gt(arg, top), inf, hn::Exp(d, arg)));
}

template <class T>
T RowMax(const T* HWY_RESTRICT x, int64_t n, T init) {
  const hn::ScalableTag<T> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  auto m0 = hn::Set(d, init), m1 = m0;  // two chains: half the latency of one
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + lanes));
  }
  T m = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

template <class T>
T ExpAffine(T* HWY_RESTRICT x, int64_t n, T a, T b) {
  const hn::ScalableTag<T> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto av = hn::Set(d, a), bv = hn::Set(d, b), top = hn::Set(d, std::log(std::numeric_limits<T>::max()));
  auto sum = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto y = exp_vector(d, hn::LoadU(d, x + i), av, bv, top);
    hn::StoreU(y, d, x + i);
    sum = hn::Add(sum, y);
  }
  if (i < n) {  // the last partial vector through a zero-padded copy; its padding left out of the sum
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(T);
    HWY_ALIGN T tail[kMaxLanes] = {};
    std::copy(x + i, x + n, tail);
    const auto y = hn::IfThenElseZero(hn::FirstN(d, size_t(n - i)), exp_vector(d, hn::Load(d, tail), av, bv, top));
    hn::Store(y, d, tail);
    std::copy(tail, tail + (n - i), x + i);
    sum = hn::Add(sum, y);
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

float RowMaxF(const float* x, int64_t n, float init) { return RowMax(x, n, init); }
double RowMaxD(const double* x, int64_t n, double init) { return RowMax(x, n, init); }
float ExpAffineF(float* x, int64_t n, float a, float b) { return ExpAffine(x, n, a, b); }
double ExpAffineD(double* x, int64_t n, double a, double b) { return ExpAffine(x, n, a, b); }

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms::cpu {

HWY_EXPORT(RowMaxF);
HWY_EXPORT(RowMaxD);
HWY_EXPORT(ExpAffineF);
HWY_EXPORT(ExpAffineD);

template <>
float row_max<float>(const float* x, int64_t n, float init) {
  return HWY_DYNAMIC_DISPATCH(RowMaxF)(x, n, init);
}
template <>
double row_max<double>(const double* x, int64_t n, double init) {
  return HWY_DYNAMIC_DISPATCH(RowMaxD)(x, n, init);
}
template <>
float exp_affine<float>(float* x, int64_t n, float a, float b) {
  return HWY_DYNAMIC_DISPATCH(ExpAffineF)(x, n, a, b);
}
template <>
double exp_affine<double>(double* x, int64_t n, double a, double b) {
  return HWY_DYNAMIC_DISPATCH(ExpAffineD)(x, n, a, b);
}

}  // namespace ms::cpu
#endif  // HWY_ONCE
