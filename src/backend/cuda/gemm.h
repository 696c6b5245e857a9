// Row-major GEMM on cuBLASLt, the mirror of backend/cpu/gemm.h: C[M,N] = alpha * op(A) * op(B) + beta * C
// with op(A) [M,K] (A stored [K,M] when ta) and op(B) [K,N] (B stored [N,K] when tb). A and B are bf16,
// products accumulate in fp32, C is bf16 (activations) or fp32 (weight gradients).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/device.h"

namespace ms::cuda {

// The cuBLASLt handle, its workspace (one device allocation, made once, before any step) and the kernel
// chosen for each GEMM shape. One context serves one stream at a time: GEMMs running at once on two
// streams would share the workspace.
class GemmContext {
 public:
  GemmContext();
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // T: uint16_t (bf16) or float. Enqueued on `stream`. bias [N] (bf16, bf16 C only, or null) is added to
  // every row of the product in cuBLASLt's epilogue: a linear layer's bias costs no pass of its own.
  template <class T>
  void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t lda,
            const uint16_t* B, int64_t ldb, float beta, T* C, int64_t ldc, Stream stream,
            const uint16_t* bias = nullptr);

 private:
  void* handle_ = nullptr;     // cublasLtHandle_t
  void* workspace_ = nullptr;  // [kWorkspaceBytes] on the device
  // (ta, tb, M, N, K, lda, ldb, ldc, fp32 C, bias, operand alignment) -> cublasLtMatmulAlgo_t's bytes
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, int>;
  using Algo = std::array<uint64_t, 8>;
  std::map<Key, Algo> algos_;
};

}  // namespace ms::cuda
