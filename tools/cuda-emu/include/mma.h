#pragma once
#include "cuda_bf16.h"
#include "emu_core.h"
// nvcuda::wmma emulated: every lane keeps the whole 16x16 tile; stores are made by lane 0, then the warp syncs.
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
inline float to_f(float v) { return v; }
inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int R = std::is_same_v<Use, matrix_b> ? K : M, C = std::is_same_v<Use, matrix_a> ? K : N;
  float v[R * C];
  static constexpr int num_elements = R * C;
};
template <class U, int M, int N, int K, class T, class L>
void fill_fragment(fragment<U, M, N, K, T, L>& f, float x) {
  for (float& e : f.v) e = x;
}
template <class U, int M, int N, int K, class T, class L, class P>
void load_matrix_sync(fragment<U, M, N, K, T, L>& f, const P* p, unsigned ld) {
  using F = fragment<U, M, N, K, T, L>;
  constexpr bool col = std::is_same_v<L, col_major>;
  for (int r = 0; r < F::R; ++r)
    for (int c = 0; c < F::C; ++c) f.v[r * F::C + c] = to_f(col ? p[c * ld + r] : p[r * ld + c]);
  __syncwarp();
}
template <int M, int N, int K, class P>
void load_matrix_sync(fragment<accumulator, M, N, K, float, void>& f, const P* p, unsigned ld, layout_t l) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) f.v[r * N + c] = to_f(l == mem_col_major ? p[c * ld + r] : p[r * ld + c]);
  __syncwarp();
}
template <int M, int N, int K, class TA, class LA, class TB, class LB>
void mma_sync(fragment<accumulator, M, N, K, float, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, float, void>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = c.v[i * N + j];
      for (int k = 0; k < K; ++k) s += a.v[i * K + k] * b.v[k * N + j];
      out[i * N + j] = s;
    }
  std::memcpy(d.v, out, sizeof out);
}
template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float, void>& f, unsigned ld, layout_t l) {
  __syncwarp();
  if (emu_lane() == 0)
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) (l == mem_col_major ? p[c * ld + r] : p[r * ld + c]) = f.v[r * N + c];
  __syncwarp();
}
}  // namespace nvcuda::wmma
