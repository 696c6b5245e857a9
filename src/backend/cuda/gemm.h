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

// `count` products in one call (cuBLASLt's strided batch): product i reads A + i * a and B + i * b and writes
// C + i * c (strides in elements; they may overlap, as the heads of one [L, heads x head_dim] matrix do).
struct GemmBatch {
  int64_t count = 1, a = 0, b = 0, c = 0;
};

// The cuBLASLt handle, its workspace (one device allocation, made once, before any step) and the kernel
// chosen for each GEMM shape. One context serves one stream at a time: GEMMs running at once on two
// streams would share the workspace.
class GemmContext {
 public:
  GemmContext();
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // T: uint16_t (bf16) or float. In: uint16_t (bf16 operands, the model's) or float (fp32 operands with fp32
  // products, not TF32: the frozen VAE's, which Wan runs in fp32; fp32 C only). Enqueued on `stream`. bias [N]
  // (bf16, bf16 C only, or null) is added to every row of the product in cuBLASLt's epilogue: a linear layer's bias
  // costs no pass of its own. Where cuBLASLt has no kernel with that epilogue for a shape and operand alignment, the
  // product runs without it and a kernel adds the bias (two bf16 roundings instead of one). batch: several products
  // of the same shape in one launch (no bias then).
  template <class T, class In = uint16_t>
  void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const In* A, int64_t lda, const In* B,
            int64_t ldb, float beta, T* C, int64_t ldc, Stream stream, const uint16_t* bias = nullptr,
            const GemmBatch& batch = {});

  // Tests force the fallback: the bias added by a kernel after an epilogue-free product.
  void set_bias_epilogue(bool on) { bias_epilogue_ = on; }
  // GEMMs with a bias that took the fallback so far (the device check reports it).
  int64_t bias_fallbacks() const { return bias_fallbacks_; }

 private:
  void* handle_ = nullptr;     // cublasLtHandle_t
  void* workspace_ = nullptr;  // [kWorkspaceBytes] on the device
  // (ta, tb, M, N, K, lda, ldb, ldc, fp32 C, fp32 A and B, bias, operand alignment, batch count and strides) ->
  // cublasLtMatmulAlgo_t's bytes
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool, int,
                         std::array<int64_t, 4>>;
  struct Algo {
    std::array<uint64_t, 8> bytes;  // cublasLtMatmulAlgo_t
    bool bias_epilogue;             // the bias is added in the epilogue (else by a kernel after the product)
  };
  std::map<Key, Algo> algos_;
  bool bias_epilogue_ = true;
  int64_t bias_fallbacks_ = 0;
};

}  // namespace ms::cuda
