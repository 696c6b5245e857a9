// The row passes of a softmax on the CPU, in Highway vectors compiled for every SIMD target and picked at run time:
// the attention kernels' scores -> probabilities. As scalar code (a std::max chain through memory, one std::exp per
// score) they cost more than the GEMMs around them (docs/benchmarks.md).
#pragma once
#include <cstdint>

namespace ms::cpu {

// max(init, x[0], ..., x[n - 1]); NaN elements are skipped or returned, as the vector unit has it (a NaN score
// makes its row NaN through exp_affine either way).
template <class T>
T row_max(const T* x, int64_t n, T init);

// x[i] = exp(a x[i] + b) for i in [0, n) (contrib/math's Exp: within 1 ulp of std::exp); returns the sum of the
// results. A NaN argument gives NaN, one above the largest finite result +inf, one below about -104 (float) or
// -1000 (double) zero; every element takes the same path, the last partial vector included, so a result does not
// depend on its place in the row.
template <class T>
T exp_affine(T* x, int64_t n, T a, T b);

}  // namespace ms::cpu
