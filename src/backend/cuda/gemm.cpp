#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/linear.h"

namespace ms::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what cuBLASLt's Hopper kernels ask for at most

// Owns one cuBLASLt descriptor.
template <class D, cublasStatus_t (*Destroy)(D)>
struct Owned {
  D d = nullptr;
  ~Owned() {
    if (d) Destroy(d);
  }
};
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;

// A column-major rows x cols matrix with leading dimension ld; count of them, `stride` elements apart.
void make_layout(Layout& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t count,
                 int64_t stride) {
  MS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.d, type, uint64_t(rows), uint64_t(cols), ld));
  if (count == 1) return;
  const int32_t n = int32_t(count);
  MS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
  MS_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(l.d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

}  // namespace

GemmContext::GemmContext() {
  MS_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  cublasLtHandle_t h = nullptr;
  const cublasStatus_t st = cublasLtCreate(&h);
  if (st != CUBLAS_STATUS_SUCCESS) cudaFree(workspace_);
  MS_CUBLAS_CHECK(st);
  handle_ = h;
}

GemmContext::~GemmContext() {
  cudaFree(workspace_);
  cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

template <class T, class In>
void GemmContext::gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const In* A, int64_t lda,
                       const In* B, int64_t ldb, float beta, T* C, int64_t ldc, Stream stream, const uint16_t* bias,
                       const GemmBatch& batch) {
  static_assert(std::is_same_v<T, uint16_t> || std::is_same_v<T, float>);
  constexpr bool f32_in = std::is_same_v<In, float>;
  static_assert(f32_in ? std::is_same_v<T, float> : std::is_same_v<In, uint16_t>, "fp32 operands give an fp32 C");
  const cudaDataType_t in = f32_in ? CUDA_R_32F : CUDA_R_16BF;
  MS_CHECK(M > 0 && N > 0 && K > 0, "gemm of ", M, "x", N, "x", K);
  // Row-major C [M,N] is column-major C^T [N,M] = op(B)^T [N,K] * op(A)^T [K,M]: B is the first operand.
  const cudaDataType_t out = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  MS_CHECK(!bias || (std::is_same_v<T, uint16_t>), "gemm: a bias needs a bf16 output");
  MS_CHECK(batch.count >= 1 && batch.count <= INT32_MAX && (batch.count == 1 || !bias), "gemm: a batch of ",
           batch.count, bias ? " with a bias" : "", " (1 to 2^31 - 1 products; a batch of several takes no bias)");
  const cublasOperation_t opx = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opy = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  using Desc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
  auto describe = [&](Desc& desc, bool epilogue) {
    MS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &opx, sizeof(opx)));
    MS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &opy, sizeof(opy)));
    if (!epilogue) return;
    // Column-major C^T has N rows: the epilogue's bias runs along them.
    const cublasLtEpilogue_t bias_epilogue = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_16BF;
    MS_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias_epilogue, sizeof(bias_epilogue)));
    MS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    MS_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  };
  Layout x, y, c;
  make_layout(x, in, tb ? K : N, tb ? N : K, ldb, batch.count, batch.b);
  make_layout(y, in, ta ? M : K, ta ? K : M, lda, batch.count, batch.a);
  make_layout(c, out, N, M, ldc, batch.count, batch.c);
  auto* h = static_cast<cublasLtHandle_t>(handle_);
  // The heuristic's choice is cached per shape and operand alignment (cuBLASLt assumes 256-byte aligned
  // pointers unless told otherwise; arena sub-buffers and slices can be less). A product without epilogue is the
  // same whether a bias kernel follows it or not, so the key holds whether the epilogue is asked for.
  // Every product of a batch starts a stride on: its alignment counts too.
  const uintptr_t any = uintptr_t(A) | uintptr_t(B) | uintptr_t(C) | uintptr_t(bias) |
                        uintptr_t(batch.a * int64_t(sizeof(In))) | uintptr_t(batch.b * int64_t(sizeof(In))) |
                        uintptr_t(batch.c * int64_t(sizeof(T)));
  const uint32_t align = uint32_t(std::min<uintptr_t>(256, any & (~any + 1)));
  const bool ask_epilogue = bias && bias_epilogue_;
  const Key key{ta,
                tb,
                M,
                N,
                K,
                lda,
                ldb,
                ldc,
                std::is_same_v<T, float>,
                f32_in,
                ask_epilogue,
                int(align),
                {batch.count, batch.a, batch.b, batch.c}};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
    MS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
    const uint64_t ws = kWorkspaceBytes;
    MS_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      MS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.d, attr, &align, sizeof(align)));
    // The heuristic's best kernel, with the bias epilogue first where asked, then without it.
    std::optional<Algo> chosen;
    for (const bool epilogue : {true, false}) {
      if (epilogue && !ask_epilogue) continue;
      Desc desc;
      describe(desc, epilogue);
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st =
          cublasLtMatmulAlgoGetHeuristic(h, desc.d, x.d, y.d, c.d, c.d, pref.d, 1, &result, &found);
      if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) continue;
      MS_CUBLAS_CHECK(st);
      static_assert(sizeof(result.algo) == sizeof(Algo::bytes));
      chosen = Algo{{}, epilogue};
      std::memcpy(chosen->bytes.data(), &result.algo, sizeof result.algo);
      break;
    }
    MS_CHECK(chosen, "cuBLASLt has no kernel for a ", M, "x", N, "x", K, f32_in ? " fp32" : " bf16", " GEMM",
             batch.count > 1 ? cat(" batch of ", batch.count) : "", " (", ta ? "A transposed, " : "",
             tb ? "B transposed, " : "", "leading dimensions ", lda, ", ", ldb, ", ", ldc, ", operands aligned to ",
             align, " bytes, ", std::is_same_v<T, float> ? "fp32" : "bf16", " output)");
    it = algos_.emplace(key, *chosen).first;
  }
  const Algo& chosen = it->second;
  Desc desc;
  describe(desc, chosen.bias_epilogue);
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, chosen.bytes.data(), sizeof algo);
  MS_CUBLAS_CHECK(cublasLtMatmul(h, desc.d, &alpha, B, x.d, A, y.d, &beta, C, c.d, C, c.d, &algo, workspace_,
                                 kWorkspaceBytes, stream));
  if constexpr (std::is_same_v<T, uint16_t>)
    if (bias && !chosen.bias_epilogue) {
      add_row_bias(C, bias, M, N, ldc, stream);
      ++bias_fallbacks_;
    }
}

template void GemmContext::gemm<uint16_t>(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                                          const uint16_t*, int64_t, float, uint16_t*, int64_t, Stream, const uint16_t*,
                                          const GemmBatch&);
template void GemmContext::gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                                       const uint16_t*, int64_t, float, float*, int64_t, Stream, const uint16_t*,
                                       const GemmBatch&);
template void GemmContext::gemm<float, float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                              const float*, int64_t, float, float*, int64_t, Stream, const uint16_t*,
                                              const GemmBatch&);

}  // namespace ms::cuda
