#include "ops/mse_loss.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"

namespace ms::cpu {

namespace {
// Elements per partial sum. Fixed (not per thread), so the summation order and the loss bits do
// not depend on the thread count.
constexpr int64_t kChunk = 4096;
}  // namespace

template <class T>
double mse_loss(const MseLossParams<T>& p) {
  const T *pred = p.pred, *target = p.target;
  T* dpred = p.dpred;
  const int64_t n = p.n;
  const double scale = p.scale;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);  // [chunks]
  const double g = 2.0 / double(n) * scale;
  parallel_for(chunks, [&](int64_t k) {
    double s = 0;
    for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); ++i) {
      const double e = double(pred[i]) - double(target[i]);
      s += e * e;
      if (dpred) dpred[i] = T(g * e);
    }
    partial[k] = s;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total / double(n);
}

template double mse_loss<float>(const MseLossParams<float>&);
template double mse_loss<double>(const MseLossParams<double>&);

}  // namespace ms::cpu
