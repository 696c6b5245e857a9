// row_max and exp_affine (backend/cpu/softmax_row.h), compiled for every target by foreach_target and picked at run
// time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/softmax_row.cpp"
#include "backend/cpu/softmax_row.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/vector_map-inl.h"  // per target, included again like this file

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

float RowMaxF(const float* x, int64_t n, float init) { return RowMax(x, n, init); }
double RowMaxD(const double* x, int64_t n, double init) { return RowMax(x, n, init); }
float ExpAffineF(float* x, int64_t n, float a, float b) { return exp_affine_row(x, n, a, b); }
double ExpAffineD(double* x, int64_t n, double a, double b) { return exp_affine_row(x, n, a, b); }

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
