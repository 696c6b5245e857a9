// Timing helpers of the GPU benchmarks (CUDA builds only): the median of repeated runs, timed with CUDA
// events on a stream or with the host clock.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"

namespace ms::cli {

inline double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median seconds of `repeats` runs of enqueue(), timed with CUDA events on `stream` (after one warm-up).
template <class F>
double time_events(cudaStream_t stream, int repeats, F&& enqueue) {
  cudaEvent_t a, b;
  MS_CUDA_CHECK(cudaEventCreate(&a));
  MS_CUDA_CHECK(cudaEventCreate(&b));
  enqueue();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    MS_CUDA_CHECK(cudaEventRecord(a, stream));
    enqueue();
    MS_CUDA_CHECK(cudaEventRecord(b, stream));
    MS_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    MS_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(std::move(t));
}

// Median wall seconds of `repeats` runs of f() (which must end synchronised), after one warm-up.
template <class F>
double time_host(int repeats, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto begin = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  return median(std::move(t));
}

}  // namespace ms::cli
