// Every CUDA runtime and cuBLASLt call is checked: a failure throws ms::DeviceError (an ms::Error, core/check.h)
// naming the call, the error, the file and the line. Kernel launches are checked with MS_CUDA_CHECK_LAUNCH() right
// after.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "core/check.h"

namespace ms::cuda {

[[noreturn]] void fail_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line);

}  // namespace ms::cuda

#define MS_CUDA_CHECK(call)                                                                    \
  do {                                                                                         \
    const cudaError_t ms_cuda_e = (call);                                                      \
    if (ms_cuda_e != cudaSuccess) ::ms::cuda::fail_cuda(ms_cuda_e, #call, __FILE__, __LINE__); \
  } while (0)

#define MS_CUBLAS_CHECK(call)                                                                                  \
  do {                                                                                                         \
    const cublasStatus_t ms_cublas_s = (call);                                                                 \
    if (ms_cublas_s != CUBLAS_STATUS_SUCCESS) ::ms::cuda::fail_cublas(ms_cublas_s, #call, __FILE__, __LINE__); \
  } while (0)

#define MS_CUDA_CHECK_LAUNCH() MS_CUDA_CHECK(cudaGetLastError())
