// Kernels that exercise each wrapper of backend/cuda/ptx.cuh on its own (tests/cuda/test_ptx.cpp), and the mutations
// whose failure shows that the emulator sees a tensor-core kernel's mistakes. Every pointer is device memory; each call
// runs on the default stream.
#pragma once
#include <cstdint>

namespace ms::test::ptx_probe {

enum class Mutation { none, wrong_fragment, no_wait, no_barrier };

// One warp: A (16 x 16), B (16 x 8, k by n) and C (16 x 8), all row-major, read into fragments by the ISA's tables;
// d = A B + C written back by them. wrong_fragment exchanges A's rows g and g + 8.
void mma(const uint16_t* a, const uint16_t* b, const float* c, float* d, Mutation m);
// One warp: n (1, 2, 4) 8 x 8 bf16 matrices stored [n][8][8] staged in shared memory, then ldmatrix .xn (.trans);
// out[lane * 4 + i] = the lane's register i (32 x 4 words, those past n untouched).
void ldmatrix(const uint16_t* matrices, int n, bool trans, uint32_t* out);
// 128 threads: a rows x 64 bf16 matrix through a double-buffered cp.async pipeline of 16-row tiles (past the last row
// zero-filled); out[t] = thread t's sum of column t % 64 over the rows whose parity is t / 64. no_wait leaves out the
// wait, no_barrier the barrier between the wait and the reads of the other threads' rows.
void cp_async_columns(const uint16_t* src, int rows, float* out, Mutation m);
// One warp, the way the tensor-core kernels combine them: A (16 x 16) and B (16 x 8, k by n) staged with cp.async,
// fragments by ldmatrix (A .x4, B .x2 .trans), d = A B + C stored by the accumulator's table.
void tile_gemm(const uint16_t* a, const uint16_t* b, const float* c, float* d);

}  // namespace ms::test::ptx_probe
