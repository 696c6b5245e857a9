#include "cli/ceilings.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/cpu/gemm.h"

namespace ms::cli {

double measure_sgemm_rate(int64_t n) {
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu::gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s);  // rep 0 warms up
  }
  return best;
}

}  // namespace ms::cli
