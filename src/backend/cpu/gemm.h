// Row-major GEMM on OpenBLAS: C[M,N] = alpha * op(A) * op(B) + beta * C.
// op(A) is [M,K] (A stored [K,M] when ta), op(B) is [K,N] (B stored [N,K] when tb).
#pragma once
#include <cstdint>

namespace ms::cpu {

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb,
          T beta, T* C, int64_t ldc);

// The name of the OpenBLAS kernels in use ("Haswell", "SkylakeX", ...), for benchmark headers.
const char* openblas_coretype();

}  // namespace ms::cpu
