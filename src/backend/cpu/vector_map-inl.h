// Per-target Highway helpers of the CPU kernels that map arrays vector by vector: included, like hwy/*-inl.h, once
// for each target by a file compiled through foreach_target (softmax_row.cpp, activation.cpp, dsa.cpp,
// dsa_offsets.cpp).
#if defined(MEGASLIDE_VECTOR_MAP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MEGASLIDE_VECTOR_MAP_INL_H_
#undef MEGASLIDE_VECTOR_MAP_INL_H_
#else
#define MEGASLIDE_VECTOR_MAP_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(a x + b) of one vector, with Exp's range completed: NaN stays NaN (Highway's Exp maps it to 0), and above the
// log of the largest finite value the result is +inf (Exp's own result there is garbage once the exponent bits
// overflow into the sign; tests/test_softmax_row.cpp checks both sides of the cut-off in float and double).
template <class D>
HWY_INLINE hn::Vec<D> exp_vector(D d, hn::Vec<D> x, hn::Vec<D> a, hn::Vec<D> b) {
  using T = hn::TFromD<D>;
  const auto arg = hn::MulAdd(a, x, b);
  const auto top = hn::Set(d, T(std::log(std::numeric_limits<T>::max())));
  const auto inf = hn::Set(d, std::numeric_limits<T>::infinity());
  return hn::IfThenElse(hn::IsNaN(arg), arg, hn::IfThenElse(hn::Gt(arg, top), inf, hn::Exp(d, arg)));
}

// out[i] = f(valid, in[i]...) for i in [0, n), a vector of Lanes(d) elements at a time; `valid` masks the lanes that
// hold elements. The last partial vector goes through zero-padded copies of the inputs, and only its valid lanes are
// stored, so every element takes the same path. out may be one of the inputs.
template <class D, class F, class... In>
HWY_INLINE void map_vectors(D d, int64_t n, hn::TFromD<D>* out, const F& f, const In*... in) {
  using T = hn::TFromD<D>;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto all = hn::FirstN(d, size_t(lanes));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(f(all, hn::LoadU(d, in + i)...), d, out + i);
  if (i == n) return;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(T);
  auto padded = [&](const T* p) {
    HWY_ALIGN T buf[kMaxLanes] = {};
    std::copy(p + i, p + n, buf);
    return hn::Load(d, buf);
  };
  HWY_ALIGN T res[kMaxLanes];
  hn::Store(f(hn::FirstN(d, size_t(n - i)), padded(in)...), d, res);
  std::copy(res, res + (n - i), out + i);
}

// x[i] = exp(a x[i] + b) for i in [0, n); returns the sum of the results. softmax_row.h's exp_affine, for the kernels
// compiled per target themselves (dsa.cpp), which thus run it on their own target without a dispatch per row.
template <class T>
HWY_INLINE T exp_affine_row(T* x, int64_t n, T a, T b) {
  const hn::ScalableTag<T> d;
  const auto av = hn::Set(d, a), bv = hn::Set(d, b);
  auto sum = hn::Zero(d);
  map_vectors(
      d, n, x,
      [&](auto valid, auto v) {
        const auto y = hn::IfThenElseZero(valid, exp_vector(d, v, av, bv));  // padding left out of the sum
        sum = hn::Add(sum, y);
        return y;
      },
      x);
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Calls map(i0, i1) on the chunks [i0, i1) of [0, n), `chunk` elements each but the last, in parallel from
// `min_parallel` elements on (below, threads cost more than they save).
template <class F>
void parallel_chunks(int64_t n, int64_t chunk, int64_t min_parallel, const F& map) {
  const int64_t tasks = (n + chunk - 1) / chunk;
  parallel_for(
      tasks, [&](int64_t t) { map(t * chunk, std::min(n, (t + 1) * chunk)); }, n < min_parallel ? tasks + 1 : 2);
}

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MEGASLIDE_VECTOR_MAP_INL_H_
