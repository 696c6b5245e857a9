// The emulator's src/backend/cuda/ptx.cuh: each wrapper with the same signature, each lane holding exactly its fragment
// as the PTX ISA's tables place it (written here from the tables, apart from the kernels' use of them). The warp-wide
// instructions exchange the lanes' operands through the warp's barrier; cp.async copies land at their group's wait,
// their destinations poisoned until then, so a read before the wait, or by another thread before a barrier, sees NaN.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "emu_core.h"

namespace ms::cuda::ptx {

inline uint32_t pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}
inline float emu_half(uint32_t reg, int h) { return __bfloat162float(__ushort_as_bfloat16(uint16_t(reg >> (16 * h)))); }

// mma.m16n8k16 .row.col: the warp's A (16x16), B (16x8, k by n) and C (16x8) gathered from every lane's registers,
// then each lane's four D elements. Lane l = 4g + t; register r, half h:
//   A: row g + 8 (r % 2), column 2t + h + 8 (r / 2);  B: row (k) 2t + h + 8 r, column g;  C, D element i: row
//   g + 8 (i / 2), column 2t + i % 2.
inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  EmuWarp& w = emu_warp();
  if (w.size != 32) emu_fail("mma.sync in a warp of fewer than 32 threads");
  uint32_t* mine = w.regs[emu_lane()];
  std::memcpy(mine, a, 16);
  std::memcpy(mine + 4, b, 8);
  std::memcpy(mine + 6, c, 16);
  emu_arrive(w.sync);
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) A[g + 8 * (r % 2)][2 * t + h + 8 * (r / 2)] = emu_half(w.regs[l][r], h);
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) B[2 * t + h + 8 * r][g] = emu_half(w.regs[l][4 + r], h);
  }
  const int g = emu_lane() / 4, t = emu_lane() % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float s = c[i];
    for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];  // bf16 products are exact in fp32
    out[i] = s;
  }
  emu_arrive(w.sync);
  std::memcpy(d, out, sizeof out);
}

// ldmatrix .m8n8 .b16: lanes 8i..8i+7 give the rows of matrix i (only those of the N matrices are read); lane l gets
// row l / 4, columns 2 (l % 4) + {0,1}, or with .trans row 2 (l % 4) + {0,1} of column l / 4 (of the rows as stored).
template <int N, bool kTrans>
void emu_ldmatrix(uint32_t (&r)[N], const void* row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  EmuWarp& w = emu_warp();
  if (w.size != 32) emu_fail("ldmatrix in a warp of fewer than 32 threads");
  const int l = emu_lane();
  std::memcpy(w.regs[l], &row, sizeof row);
  if (l < 8 * N && (reinterpret_cast<uintptr_t>(row) % 16 != 0 || !emu_in_shared(row, 16)))
    emu_fail("ldmatrix: a row address not 16-byte aligned in this block's shared memory");
  emu_arrive(w.sync);
  const auto element = [&](int matrix, int rr, int cc) {
    const uint16_t* p;
    std::memcpy(&p, w.regs[8 * matrix + rr], sizeof p);
    return uint32_t(p[cc]);
  };
  for (int i = 0; i < N; ++i)
    r[i] = kTrans ? element(i, 2 * (l % 4), l / 4) | element(i, 2 * (l % 4) + 1, l / 4) << 16
                  : element(i, l / 4, 2 * (l % 4)) | element(i, l / 4, 2 * (l % 4) + 1) << 16;
  emu_arrive(w.sync);
}
template <int N>
void ldmatrix(uint32_t (&r)[N], const void* row) {
  emu_ldmatrix<N, false>(r, row);
}
template <int N>
void ldmatrix_trans(uint32_t (&r)[N], const void* row) {
  emu_ldmatrix<N, true>(r, row);
}

// cp.async: the source read now (the hardware reads it by the wait; kernels must not change it in between), the
// destination poisoned until the group's wait.
inline void cp_async16(void* smem, const void* gmem, int src_bytes = 16) {
  if (reinterpret_cast<uintptr_t>(smem) % 16 != 0 || reinterpret_cast<uintptr_t>(gmem) % 16 != 0 ||
      !emu_in_shared(smem, 16) || src_bytes < 0 || src_bytes > 16)
    emu_fail("cp.async: a destination not 16-byte aligned in shared memory, a misaligned source or a size over 16");
  EmuCopy c{static_cast<unsigned char*>(smem), {}};
  if (src_bytes > 0) std::memcpy(c.bytes, gmem, size_t(src_bytes));
  std::memset(c.dst, 0xff, 16);
  emu_fiber().open.push_back(c);
}
inline void cp_async_commit() {
  EmuFiber& f = emu_fiber();
  f.pending.push_back(std::move(f.open));
  f.open.clear();
}
template <int N>
void cp_async_wait() {
  EmuFiber& f = emu_fiber();
  while (f.pending.size() > size_t(N)) {
    for (const EmuCopy& c : f.pending.front()) std::memcpy(c.dst, c.bytes, 16);
    f.pending.pop_front();
  }
}

}  // namespace ms::cuda::ptx
