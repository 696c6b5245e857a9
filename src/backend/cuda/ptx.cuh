// The inline PTX of the tensor-core kernels, one wrapper per instruction (PTX ISA 8.x; sm_80 and later), so that the
// CUDA emulator can put its own in their place (tools/cuda-emu/include/backend/cuda/ptx.cuh): nothing else in
// backend/cuda writes asm. Fragments are the ISA's: lane = 4 * group + tid_in_group; a 32-bit register holds two
// bf16, the lower-indexed element in its low half (docs/cuda.md, "Tensor-core fragments").
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace ms::cuda::ptx {

// Two bf16 in one register: lo in bits 0-15, hi in bits 16-31.
__device__ __forceinline__ uint32_t pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}

// d = a . b + c for a 16x16 (row) by 16x8 (col) bf16 product, f32 accumulate: a[4] rows g and g + 8, columns
// 2t + {0,1} and 2t + 8 + {0,1}; b[2] rows (k) 2t + {0,1} and 2t + 8 + {0,1} of column g; c, d[4] rows g and g + 8,
// columns 2t + {0,1}.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                               const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ldmatrix .m8n8 .b16: N 8x8 matrices, lanes 8i..8i+7 naming the 16-byte rows of matrix i (shared memory, 16-byte
// aligned); r[i] of lane l holds row l/4, columns 2(l%4) + {0,1} of matrix i, or with .trans those of its transpose.
template <int N>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  const unsigned a = unsigned(__cvta_generic_to_shared(row));
  if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
template <int N>
__device__ __forceinline__ void ldmatrix_trans(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  const unsigned a = unsigned(__cvta_generic_to_shared(row));
  if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// 16 bytes from global to shared memory, asynchronously: the first src_bytes (0-16) read, the rest zero-filled (a
// tile's edge). Both addresses 16-byte aligned. Visible to this thread after the wait of its group, to the block after
// that and a barrier.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes = 16) {
  const unsigned a = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(gmem), "r"(src_bytes) : "memory");
}
// Closes the group of this thread's cp.async16 calls since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are pending (the newest N).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace ms::cuda::ptx
