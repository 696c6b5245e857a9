#include "ops/mse_loss.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
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
  MS_CHECK(p.skip == 0 || (p.period > p.skip && n % p.period == 0), "mse_loss: skip ", p.skip, " of ", p.period, " of ",
           p.n);
  const double g = 2.0 / double(p.kept()) * scale;
  parallel_for(chunks, [&](int64_t k) {
    double s = 0;
    for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); ++i) {
      const double e = p.left_out(i) ? 0.0 : double(pred[i]) - double(target[i]);
      s += e * e;
      if (dpred) dpred[i] = T(g * e);
    }
    partial[k] = s;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total / double(p.kept());
}

template double mse_loss<float>(const MseLossParams<float>&);
template double mse_loss<double>(const MseLossParams<double>&);

}  // namespace ms::cpu
