// The GPU this process computes on (device 0, or its local rank's in a distributed run), and the current stream of
// the launch being enqueued.
#pragma once
#include <cstdint>
#include <string>

struct CUstream_st;

namespace ms::cuda {

using Stream = CUstream_st*;  // cudaStream_t

constexpr int kComputeBytes = 2;  // the CUDA backend computes in bf16: weights and activations

// dsa's K/V rows a block stages in shared memory by default (backend/cuda/dsa.h): 640 x 64 channels x 2 B = 80 KiB.
constexpr int64_t kDsaHaloRows = 640;

// Where an op's kernels run: the stream they are enqueued on and the fp32 device scratch of the deterministic
// backward reductions (runtime/reduction_scratch.h sizes it per op). Each launcher takes (params, launch).
struct Launch {
  Stream stream = nullptr;
  float* scratch = nullptr;  // [scratch_numel] on the device
  int64_t scratch_numel = 0;
  int64_t dsa_halo_rows = kDsaHaloRows;  // 0: none, every corner read from global memory (speed only)
  bool dsa_tensor_cores = true;          // dsa's forward on tensor cores where it applies (speed only)
  // The scratch, checked to hold `need` floats.
  float* scratch_for(int64_t need) const;
};

// "" when a CUDA GPU can be used; otherwise why not, in words (no driver, no device, too old a driver).
std::string unusable_reason();

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t memory_bytes = 0, l2_bytes = 0;
};
// This process's device; throws ms::Error naming unusable_reason() when there is none.
DeviceInfo device_info();

// The device this process computes on: 0 unless select_device chose another.
int device_index();
// Makes device `index` (of those CUDA_VISIBLE_DEVICES shows) this process's, before its backend is made: a rank of a
// distributed run takes its local rank's. Throws ms::Error naming the count when there is no such device.
void select_device(int index);
// How many CUDA devices this process sees; 0 without a usable GPU.
int device_count();
// Makes this process's device the calling thread's current one (CUDA's current device is per thread), once per
// thread: for threads other than the one that made the backend.
void use_device_on_this_thread();

// The stream that ops enqueue on: set by CudaBackend::launch around the op's host function (default 0,
// the legacy stream, outside a launch).
Stream current_stream();
void set_current_stream(Stream s);

}  // namespace ms::cuda
