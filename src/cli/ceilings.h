// Ceilings the benchmarks measure in the same run, so that their numbers are ratios (docs/benchmarks.md).
#pragma once
#include <cstdint>

namespace ms::cli {

// Best-of-3 sgemm rate (FLOP/s) on square n x n matrices with every thread: the CPU's GEMM ceiling.
double measure_sgemm_rate(int64_t n);

}  // namespace ms::cli
