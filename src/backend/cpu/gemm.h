// Row-major GEMM on OpenBLAS: C[M,N] = alpha * op(A) * op(B) + beta * C.
// op(A) is [M,K] (A stored [K,M] when ta), op(B) is [K,N] (B stored [N,K] when tb).
#pragma once
#include <cstdint>
#include <string>

namespace ms::cpu {

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb,
          T beta, T* C, int64_t ldc);

// The name of the OpenBLAS kernels in use ("Haswell", "SkylakeX", ...), for logs and benchmark headers.
const char* openblas_coretype();

// A sentence for the log when OPENBLAS_CORETYPE is set and OpenBLAS runs its AVX2 kernels (Haswell, Zen) on a CPU
// and OS with AVX-512 F/BW/DQ/VL, where OpenBLAS's own choice may use it (it does on the Zen 5 of docs/benchmarks.md,
// at twice the sgemm rate); empty otherwise.
std::string openblas_coretype_note();

}  // namespace ms::cpu
