// The double sums over a row of the CPU's norm kernels, in 8 interleaved partial sums: one running sum waits out
// every add's latency (4 cycles), and at C = 256 those chains cost the norms more than their memory traffic
// (docs/benchmarks.md, issue 34). Term c goes to partial sum c mod 8, the 8 are added pairwise at the end: the order
// is fixed, so a result does not depend on the row's alignment, nor on the machine in a build that does not contract
// a term's product into its add (the x86-64 baseline has no FMA).
#pragma once
#include <cstdint>

namespace ms::cpu {

// Channels per task in the norms' weight-gradient reductions over rows (layernorm.cpp, rmsnorm.cpp).
inline constexpr int64_t kNormChannelBlock = 64;

// sum over c in [0, n) of term(c).
template <class F>
inline double row_sum(int64_t n, F&& term) {
  double acc[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int j = 0; j < 8; ++j) acc[j] += term(c + j);
  for (int j = 0; c < n; ++c, ++j) acc[j] += term(c);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The sums over c in [0, n) of term(c).first and term(c).second, each as row_sum does it, in one pass.
template <class F>
inline void row_sums(int64_t n, F&& term, double& first, double& second) {
  double a[8] = {}, b[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int j = 0; j < 8; ++j) {
      const auto [x, y] = term(c + j);
      a[j] += x;
      b[j] += y;
    }
  for (int j = 0; c < n; ++c, ++j) {
    const auto [x, y] = term(c);
    a[j] += x;
    b[j] += y;
  }
  first = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  second = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

}  // namespace ms::cpu
