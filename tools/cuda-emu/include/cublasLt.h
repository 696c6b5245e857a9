#pragma once
// cuBLASLt emulated from its documented semantics: column-major layouts (type, rows, cols, ld; a strided batch of
// them), D = alpha op(A) op(B) + beta C, the BIAS epilogue adding bias[row] to every column of D, fp32 accumulation.
#include <cstdint>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_runtime_api.h"
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
inline const char* cublasLtGetStatusName(cublasStatus_t) { return "CUBLAS_EMU"; }
inline const char* cublasLtGetStatusString(cublasStatus_t) { return "emulated"; }
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA,
  CUBLASLT_MATMUL_DESC_TRANSB,
  CUBLASLT_MATMUL_DESC_EPILOGUE,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
};
struct EmuLtDesc {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
};
struct EmuLtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;   // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT
  int64_t stride = 0;  // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, in elements
};
enum cublasLtMatrixLayoutAttribute_t {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
};
struct EmuLtPref {};
struct EmuLtHandle {};
using cublasLtHandle_t = EmuLtHandle*;
using cublasLtMatmulDesc_t = EmuLtDesc*;
using cublasLtMatrixLayout_t = EmuLtLayout*;
using cublasLtMatmulPreference_t = EmuLtPref*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = new EmuLtHandle;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t, cudaDataType_t) {
  *d = new EmuLtDesc;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                     const void* v, size_t) {
  void* field[] = {&d->ta, &d->tb, &d->ep, &d->bias, &d->bias_type};  // in the attributes' order
  const size_t bytes[] = {sizeof d->ta, sizeof d->tb, sizeof d->ep, sizeof d->bias, sizeof d->bias_type};
  std::memcpy(field[a], v, bytes[a]);
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t t, uint64_t r, uint64_t c,
                                                 int64_t ld) {
  if (ld < int64_t(r)) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new EmuLtLayout{t, r, c, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                       const void* v, size_t n) {
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == sizeof l->batch)
    return std::memcpy(&l->batch, v, n), CUBLAS_STATUS_SUCCESS;
  if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == sizeof l->stride)
    return std::memcpy(&l->stride, v, n), CUBLAS_STATUS_SUCCESS;
  return CUBLAS_STATUS_INVALID_VALUE;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  *p = new EmuLtPref;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                           cublasLtMatmulPreferenceAttributes_t, const void*, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                                     cublasLtMatmulHeuristicResult_t* r, int* found) {
  *r = {};
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}
inline float emu_lt_get(const void* p, cudaDataType_t t, int64_t i) {
  return t == CUDA_R_32F ? static_cast<const float*>(p)[i] : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
// Checks the shapes now and enqueues the product on the stream, with the descriptors copied (the caller destroys
// them when the call returns).
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                                     cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb,
                                     const void* beta, const void* C, cublasLtMatrixLayout_t lc, void* D,
                                     cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t*, void*, size_t,
                                     cudaStream_t stream) {
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const uint64_t M = ld->rows, N = ld->cols, K = d->ta == CUBLAS_OP_N ? la->cols : la->rows;
  if ((d->ta == CUBLAS_OP_N ? la->rows : la->cols) != M || (d->tb == CUBLAS_OP_N ? lb->rows : lb->cols) != K ||
      (d->tb == CUBLAS_OP_N ? lb->cols : lb->rows) != N || lc->rows != M || lc->cols != N)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (la->batch != ld->batch || lb->batch != ld->batch || lc->batch != ld->batch || lc->stride != ld->stride ||
      ld->batch < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  emu_enqueue(stream, [=, d = *d, la = *la, lb = *lb, lc = *lc, ld = *ld] {
    std::vector<float> out(M * N);
    for (int64_t i = 0; i < ld.batch; ++i) {  // product i: every matrix `stride` elements on per product
      const int64_t oa = i * la.stride, ob = i * lb.stride, oc = i * lc.stride, od = i * ld.stride;
      for (uint64_t n = 0; n < N; ++n)
        for (uint64_t m = 0; m < M; ++m) {
          float s = 0;
          for (uint64_t k = 0; k < K; ++k) {
            const float a = emu_lt_get(A, la.type, oa + int64_t(d.ta == CUBLAS_OP_N ? m + k * la.ld : k + m * la.ld));
            const float b = emu_lt_get(B, lb.type, ob + int64_t(d.tb == CUBLAS_OP_N ? k + n * lb.ld : n + k * lb.ld));
            s += a * b;
          }
          float r = al * s + (be != 0 ? be * emu_lt_get(C, lc.type, oc + int64_t(m + n * lc.ld)) : 0.f);
          if (d.ep == CUBLASLT_EPILOGUE_BIAS) r += emu_lt_get(d.bias, d.bias_type, m);
          out[m + n * M] = r;
        }
      for (uint64_t n = 0; n < N; ++n)
        for (uint64_t m = 0; m < M; ++m) {
          const int64_t j = od + int64_t(m + n * ld.ld);
          if (ld.type == CUDA_R_32F)
            static_cast<float*>(D)[j] = out[m + n * M];
          else
            static_cast<__nv_bfloat16*>(D)[j] = __float2bfloat16(out[m + n * M]);
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
