#include "backend/cuda/device.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/check.h"

namespace ms::cuda {
namespace {
thread_local Stream current = nullptr;
int selected = 0;  // select_device's choice, read by every thread
}  // namespace

std::string unusable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls report their own
    const char* hint = e == cudaErrorInsufficientDriver ? "no NVIDIA driver is loaded, or it is older than CUDA "
                                                          "13 needs; "
                                                        : "";
    return cat(hint, cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  }
  if (n == 0) return "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)";
  return "";
}

DeviceInfo device_info() {
  if (const std::string why = unusable_reason(); !why.empty())
    MS_FAIL("no usable CUDA GPU (", why, "); use --backend cpu");
  cudaDeviceProp p{};
  MS_CUDA_CHECK(cudaGetDeviceProperties(&p, selected));
  return {p.name, p.major, p.minor, p.multiProcessorCount, int64_t(p.totalGlobalMem), int64_t(p.l2CacheSize)};
}

float* Launch::scratch_for(int64_t need) const {
  MS_CHECK(need <= scratch_numel, "cuda: an op needs ", need, " floats of scratch, the buffer holds ", scratch_numel,
           " (size it with block_reduction_scratch, runtime/reduction_scratch.h)");
  return scratch;
}

int device_index() { return selected; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void select_device(int index) {
  const int n = device_count();
  MS_CHECK(index >= 0 && index < n, "no CUDA device ", index, ": this process sees ", n,
           " (CUDA_VISIBLE_DEVICES); run at most as many ranks per machine as it has GPUs");
  MS_CUDA_CHECK(cudaSetDevice(index));
  selected = index;
}

void use_device_on_this_thread() {
  thread_local int set = -1;
  if (set == selected) return;
  MS_CUDA_CHECK(cudaSetDevice(selected));
  set = selected;
}

Stream current_stream() { return current; }
void set_current_stream(Stream s) { current = s; }

}  // namespace ms::cuda
