#include "backend/cpu/gemm.h"

#include <cblas.h>

#include <cstdlib>

namespace ms::cpu {

template <>
void gemm<float>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

template <>
void gemm<double>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

const char* openblas_coretype() { return openblas_get_corename(); }

std::string openblas_coretype_note() {
  const std::string core = openblas_get_corename();
  if (!std::getenv("OPENBLAS_CORETYPE") || (core != "Haswell" && core != "Zen")) return {};
  // libgcc's checks include the OS saving the AVX-512 registers (XCR0), as OpenBLAS's own do.
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl"))
    return {};
  return "OPENBLAS_CORETYPE is set and holds OpenBLAS to its " + core +
         " (AVX2) kernels on a CPU with AVX-512; without it OpenBLAS picks its kernels for this CPU, which can double "
         "the CPU backend's GEMM rate";
}

}  // namespace ms::cpu
