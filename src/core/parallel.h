// Data-parallel loops over OpenMP threads. Static schedule: every index is always processed by
// the same thread and no result depends on the thread count, so kernels stay deterministic.
#pragma once
#include <cstdint>

namespace ms {

int num_threads();
// The threads parallel loops (and OpenBLAS, an OpenMP build) use from now on: a rank of a distributed run takes its
// share of the machine's cores.
void set_num_threads(int n);

// Calls fn(i) for i in [0, n), in parallel when n is large enough to pay for it.
template <class F>
void parallel_for(int64_t n, F&& fn, int64_t min_parallel = 2) {
  if (n < min_parallel) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// parallel_for with a dynamic schedule, for tasks of uneven cost: only where no result depends on which thread runs
// which task (each task owns its outputs).
template <class F>
void parallel_for_dynamic(int64_t n, F&& fn, int64_t min_parallel = 2) {
  if (n < min_parallel) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// The min_parallel for parallel_for over `tasks` tasks that together do about `work` multiply-adds: below a
// million, waking threads costs more than it saves (far more on a loaded machine), so they run on the caller.
inline int64_t min_parallel_for_work(int64_t tasks, double work) { return work < 1e6 ? tasks + 1 : 2; }

}  // namespace ms
