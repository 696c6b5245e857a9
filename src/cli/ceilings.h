// Ceilings the benchmarks measure in the same run, so that their numbers are ratios (docs/benchmarks.md).
#pragma once
#include <chrono>
#include <cstdint>

namespace ms::cli {

// Wall-clock seconds of one call of fn.
template <class F>
double wall_seconds(F&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best-of-3 sgemm rate (FLOP/s) on square n x n matrices with every thread: the CPU's GEMM ceiling.
double measure_sgemm_rate(int64_t n);

}  // namespace ms::cli
