#include <cuda_bf16.h>

#include "backend/cuda/check.h"
#include "backend/cuda/ptx.cuh"
#include "ptx_probe.h"

namespace ms::test::ptx_probe {
namespace {

using ms::cuda::ptx::pack_bf16;

__device__ __nv_bfloat16 bf(const uint16_t* p, int i) { return reinterpret_cast<const __nv_bfloat16*>(p)[i]; }

// Element e (0-7) of lane (g, t)'s A fragment: register e / 2, half e % 2.
__device__ int a_row(int g, int e) { return g + 8 * ((e / 2) % 2); }
__device__ int a_col(int t, int e) { return 2 * t + e % 2 + 8 * (e / 4); }

__global__ void mma_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d, Mutation m) {
  const int g = int(threadIdx.x) / 4, t = int(threadIdx.x) % 4, flip = m == Mutation::wrong_fragment ? 8 : 0;
  uint32_t ra[4], rb[2];
  float rc[4], rd[4];
  for (int e = 0; e < 8; e += 2)
    ra[e / 2] =
        pack_bf16(bf(a, (a_row(g, e) ^ flip) * 16 + a_col(t, e)), bf(a, (a_row(g, e) ^ flip) * 16 + a_col(t, e + 1)));
  for (int e = 0; e < 4; e += 2) {
    const int k = 2 * t + 8 * (e / 2);
    rb[e / 2] = pack_bf16(bf(b, k * 8 + g), bf(b, (k + 1) * 8 + g));
  }
  for (int e = 0; e < 4; ++e) rc[e] = c[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2];
  ms::cuda::ptx::mma_bf16_16816(rd, ra, rb, rc);
  for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = rd[e];
}

template <int N, bool kTrans>
__device__ void load_matrices(const uint16_t* sm, uint32_t* out) {
  const int l = int(threadIdx.x);
  uint32_t r[N];
  const uint16_t* row = sm + (l < 8 * N ? (l / 8) * 64 + (l % 8) * 8 : 0);
  if constexpr (kTrans)
    ms::cuda::ptx::ldmatrix_trans<N>(r, row);
  else
    ms::cuda::ptx::ldmatrix<N>(r, row);
  for (int i = 0; i < N; ++i) out[l * 4 + i] = r[i];
}

__global__ void ldmatrix_kernel(const uint16_t* matrices, int n, bool trans, uint32_t* out) {
  __shared__ __align__(16) uint16_t sm[4 * 64];
  for (int i = int(threadIdx.x); i < n * 64; i += 32) sm[i] = matrices[i];
  __syncwarp();
  if (n == 1) trans ? load_matrices<1, true>(sm, out) : load_matrices<1, false>(sm, out);
  if (n == 2) trans ? load_matrices<2, true>(sm, out) : load_matrices<2, false>(sm, out);
  if (n == 4) trans ? load_matrices<4, true>(sm, out) : load_matrices<4, false>(sm, out);
}

constexpr int kColumnThreads = 128, kTileRows = 16, kCols = 64;

// Thread t copies 16 bytes of tile k: row t / 8, columns 8 (t % 8) onward.
__device__ void issue_tile(const uint16_t* src, int rows, int k, uint16_t* buffer) {
  const int t = int(threadIdx.x), row = k * kTileRows + t / 8;
  const bool in = row < rows;
  ms::cuda::ptx::cp_async16(buffer + (t / 8) * kCols + (t % 8) * 8, in ? src + int64_t(row) * kCols + (t % 8) * 8 : src,
                            in ? 16 : 0);
}

__global__ void columns_kernel(const uint16_t* src, int rows, float* out, Mutation m) {
  __shared__ __align__(16) uint16_t tiles[2][kTileRows * kCols];
  const int t = int(threadIdx.x), count = (rows + kTileRows - 1) / kTileRows;
  float acc = 0.f;
  issue_tile(src, rows, 0, tiles[0]);
  ms::cuda::ptx::cp_async_commit();
  for (int k = 0; k < count; ++k) {
    if (k + 1 < count) issue_tile(src, rows, k + 1, tiles[(k + 1) % 2]);
    ms::cuda::ptx::cp_async_commit();  // an empty group past the end, so that wait<1> always means tile k
    if (m != Mutation::no_wait) ms::cuda::ptx::cp_async_wait<1>();
    if (m != Mutation::no_barrier) __syncthreads();
    const __nv_bfloat16* tile = reinterpret_cast<const __nv_bfloat16*>(tiles[k % 2]);
    for (int r = t / kCols; r < kTileRows; r += 2) acc += __bfloat162float(tile[r * kCols + t % kCols]);
    __syncthreads();  // every read of tile k done before iteration k + 1 issues tile k + 2 into its buffer
  }
  out[t] = acc;
}

__global__ void tile_gemm_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  __shared__ __align__(16) uint16_t sa[16 * 16], sb[16 * 8];
  const int l = int(threadIdx.x), g = l / 4, t = l % 4;
  ms::cuda::ptx::cp_async16(sa + l * 8, a + l * 8);
  if (l < 16) ms::cuda::ptx::cp_async16(sb + l * 8, b + l * 8);
  ms::cuda::ptx::cp_async_commit();
  ms::cuda::ptx::cp_async_wait<0>();
  __syncwarp();
  uint32_t ra[4], rb[2];
  ms::cuda::ptx::ldmatrix<4>(ra, sa + (l % 16) * 16 + (l / 16) * 8);  // matrices: rows 0-7 | 8-15, columns 0-7 | 8-15
  ms::cuda::ptx::ldmatrix_trans<2>(rb, sb + (l % 16) * 8);            // k 0-7 | 8-15, transposed to k-pairs per n
  float rc[4], rd[4];
  for (int e = 0; e < 4; ++e) rc[e] = c[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2];
  ms::cuda::ptx::mma_bf16_16816(rd, ra, rb, rc);
  for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = rd[e];
}

}  // namespace

void mma(const uint16_t* a, const uint16_t* b, const float* c, float* d, Mutation m) {
  mma_kernel<<<1, 32>>>(a, b, c, d, m);
  MS_CUDA_CHECK_LAUNCH();
}
void ldmatrix(const uint16_t* matrices, int n, bool trans, uint32_t* out) {
  ldmatrix_kernel<<<1, 32>>>(matrices, n, trans, out);
  MS_CUDA_CHECK_LAUNCH();
}
void cp_async_columns(const uint16_t* src, int rows, float* out, Mutation m) {
  columns_kernel<<<1, kColumnThreads>>>(src, rows, out, m);
  MS_CUDA_CHECK_LAUNCH();
}
void tile_gemm(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  tile_gemm_kernel<<<1, 32>>>(a, b, c, d);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::test::ptx_probe
