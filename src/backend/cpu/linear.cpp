#include "ops/linear.h"

#include <algorithm>

#include "backend/cpu/gemm.h"
#include "core/parallel.h"

namespace ms::cpu {

template <class T>
void linear_forward(const LinearParams<T>& p) {
  const T *x = p.x, *w = p.w, *b = p.b;
  T* y = p.y;
  const int64_t N = p.N, in = p.in, out = p.out;
  if (b) {
    parallel_for(
        N,
        [&](int64_t n) {
          for (int64_t o = 0; o < out; ++o) y[n * out + o] = b[o];
        },
        64);
  }
  gemm<T>(false, true, N, out, in, T(1), x, in, w, in, b ? T(1) : T(0), y, out);
}

template <class T>
void linear_backward(const LinearParams<T>& p) {
  const T *x = p.x, *w = p.w, *dy = p.dy;
  T *dx = p.dx, *dw = p.dw, *db = p.db;
  const int64_t N = p.N, in = p.in, out = p.out;
  if (dx) gemm<T>(false, false, N, in, out, T(1), dy, out, w, in, T(1), dx, in);
  gemm<T>(true, false, out, in, N, T(1), dy, out, x, in, T(1), dw, in);
  if (db) {
    // db[o] += sum over n of dy[n, o], each column summed from n = 0 up, as a plain loop would: a block of columns
    // at a time, reading dy row by row (a column at a time strides through every row's cache line per element).
    constexpr int64_t kCols = 64;
    parallel_for((out + kCols - 1) / kCols,
                 [&](int64_t blk) {
                   const int64_t o0 = blk * kCols, cols = std::min(kCols, out - o0);
                   T s[kCols] = {};
                   for (int64_t n = 0; n < N; ++n) {
                     const T* row = dy + n * out + o0;
                     for (int64_t j = 0; j < cols; ++j) s[j] += row[j];
                   }
                   for (int64_t j = 0; j < cols; ++j) db[o0 + j] += s[j];
                 },
                 min_parallel_for_work((out + kCols - 1) / kCols, double(N) * double(out)));
  }
}

template void linear_forward<float>(const LinearParams<float>&);
template void linear_forward<double>(const LinearParams<double>&);
template void linear_backward<float>(const LinearParams<float>&);
template void linear_backward<double>(const LinearParams<double>&);

}  // namespace ms::cpu
