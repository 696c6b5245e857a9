#include "backend/cuda/check.h"

namespace ms::cuda {

void fail_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw DeviceError(
      cat("CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ") in ", call, " at ", file, ":", line));
}

void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw DeviceError(cat("cuBLASLt error ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ") in ", call,
                        " at ", file, ":", line));
}

}  // namespace ms::cuda
