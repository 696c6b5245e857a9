// The activations (ops/activation.h) in Highway vectors, compiled for every target by foreach_target and picked at run
// time. Both are x sigmoid(z(x)): SiLU with z = x, GELU-tanh with z = 2 sqrt(2/pi) (x + 0.044715 x^3), since
// 0.5 (1 + tanh(u)) = sigmoid(2u). One exp per element gives the value and the derivative,
// d/dx [x s] = s + x s (1 - s) z'(x), s = sigmoid(z). The sigmoid form keeps GELU's left tail accurate in float,
// where 1 + tanh(u) cancels (to 0 from x = -5.2 on); where s > 1/2 the small term's 1 - s is taken as e s
// (e = exp(-z)), which keeps that term's relative accuracy (1 - s carries s's rounding error). Vectorised because
// scalar tanhf calls were a visible share of the training job (docs/benchmarks.md).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/activation.cpp"
#include "ops/activation.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/vector_map-inl.h"  // per target, included again like this file

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace {

constexpr int64_t kChunk = 1 << 12;            // elements per parallel task
constexpr int64_t kMinParallel = 1 << 14;      // elements below which threads cost more than they save
constexpr double kGeluK = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;

// The gates z(x) and z'(x).
struct Gelu {
  template <class D, class V>
  static V z(D d, V x) {  // 2k x (1 + a x^2)
    using T = hn::TFromD<D>;
    return hn::Mul(hn::Mul(hn::Set(d, T(2 * kGeluK)), x),
                   hn::MulAdd(hn::Set(d, T(kGeluA)), hn::Mul(x, x), hn::Set(d, T(1))));
  }
  template <class D, class V>
  static V dz(D d, V x) {  // 2k (1 + 3a x^2)
    using T = hn::TFromD<D>;
    return hn::MulAdd(hn::Set(d, T(6 * kGeluK * kGeluA)), hn::Mul(x, x), hn::Set(d, T(2 * kGeluK)));
  }
};
struct Silu {
  template <class D, class V>
  static V z(D, V x) {
    return x;
  }
  template <class D, class V>
  static V dz(D d, V) {
    return hn::Set(d, hn::TFromD<D>(1));
  }
};

// e = exp(-z) and s = sigmoid(z) = 1 / (1 + e) of one vector.
template <class D, class V>
HWY_INLINE V sigmoid(D d, V z, V& e) {
  using T = hn::TFromD<D>;
  e = exp_vector(d, z, hn::Set(d, T(-1)), hn::Zero(d));
  return hn::Div(hn::Set(d, T(1)), hn::Add(hn::Set(d, T(1)), e));
}

template <class Gate, class T>
void Forward(const T* x, T* y, int64_t n) {  // y = x sigmoid(z(x))
  const hn::ScalableTag<T> d;
  parallel_chunks(n, kChunk, kMinParallel, [&](int64_t i0, int64_t i1) {
    map_vectors(
        d, i1 - i0, y + i0,
        [&](auto, auto v) {
          hn::Vec<decltype(d)> e;
          return hn::Mul(v, sigmoid(d, Gate::z(d, v), e));
        },
        x + i0);
  });
}

template <class Gate, class T>
void Backward(const T* x, const T* dy, T* dx, int64_t n) {  // dx += dy (s + x s (1 - s) z'(x))
  const hn::ScalableTag<T> d;
  parallel_chunks(n, kChunk, kMinParallel, [&](int64_t i0, int64_t i1) {
    map_vectors(
        d, i1 - i0, dx + i0,
        [&](auto, auto v, auto g, auto acc) {
          hn::Vec<decltype(d)> e;
          const auto s = sigmoid(d, Gate::z(d, v), e), one = hn::Set(d, T(1));
          const auto rest = hn::IfThenElse(hn::Lt(e, one), hn::Mul(e, s), hn::Sub(one, s));  // 1 - s
          const auto slope = hn::MulAdd(hn::Mul(v, hn::Mul(s, rest)), Gate::dz(d, v), s);
          return hn::MulAdd(g, slope, acc);
        },
        x + i0, dy + i0, dx + i0);
  });
}

}  // namespace

#define MS_TARGET_ENTRIES(T, S)                                                                \
  void GeluForward##S(const ActivationParams<T>& p) { Forward<Gelu>(p.x, p.y, p.n); }          \
  void GeluBackward##S(const ActivationParams<T>& p) { Backward<Gelu>(p.x, p.dy, p.dx, p.n); } \
  void SiluForward##S(const ActivationParams<T>& p) { Forward<Silu>(p.x, p.y, p.n); }          \
  void SiluBackward##S(const ActivationParams<T>& p) { Backward<Silu>(p.x, p.dy, p.dx, p.n); }
MS_TARGET_ENTRIES(float, F)
MS_TARGET_ENTRIES(double, D)
#undef MS_TARGET_ENTRIES

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms::cpu {

#define MS_DISPATCH(T, S)                                    \
  HWY_EXPORT(GeluForward##S);                                \
  HWY_EXPORT(GeluBackward##S);                               \
  HWY_EXPORT(SiluForward##S);                                \
  HWY_EXPORT(SiluBackward##S);                               \
  template <>                                                \
  void gelu_tanh_forward<T>(const ActivationParams<T>& p) {  \
    HWY_DYNAMIC_DISPATCH(GeluForward##S)(p);                 \
  }                                                          \
  template <>                                                \
  void gelu_tanh_backward<T>(const ActivationParams<T>& p) { \
    HWY_DYNAMIC_DISPATCH(GeluBackward##S)(p);                \
  }                                                          \
  template <>                                                \
  void silu_forward<T>(const ActivationParams<T>& p) {       \
    HWY_DYNAMIC_DISPATCH(SiluForward##S)(p);                 \
  }                                                          \
  template <>                                                \
  void silu_backward<T>(const ActivationParams<T>& p) {      \
    HWY_DYNAMIC_DISPATCH(SiluBackward##S)(p);                \
  }
MS_DISPATCH(float, F)
MS_DISPATCH(double, D)
#undef MS_DISPATCH

}  // namespace ms::cpu
#endif  // HWY_ONCE
