// CPU emulation of the CUDA subset megaslide's kernels use (tools/cuda-emu/run.sh, docs/cuda.md): a block's threads are
// OS threads run together,
// __syncthreads a block barrier, warp intrinsics a warp barrier; blocks run one after another (so static
// "shared" arrays are per block). Device memory is host memory.
#pragma once
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict

#include "emu_stream.h"
struct float2 {
  float x, y;
};
struct float3 {
  float x, y, z;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float3 make_float3(float a, float b, float c) { return {a, b, c}; }
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  Dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
using dim3 = Dim3;
inline thread_local Dim3 threadIdx, blockIdx;
inline thread_local Dim3 gridDim, blockDim;

struct EmuWarp {
  std::unique_ptr<std::barrier<>> bar;
  uint64_t xch[32];
  int size;
};
struct EmuBlock {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<EmuWarp> warps;
  std::vector<unsigned char> smem;
};
inline thread_local EmuBlock* emu_block;
inline thread_local unsigned char* emu_smem_ptr;
inline EmuWarp& emu_warp() { return emu_block->warps[threadIdx.x / 32]; }
inline int emu_lane() { return int(threadIdx.x % 32); }

template <class T>
T emu_exchange(T v, int src) {
  EmuWarp& w = emu_warp();
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  w.xch[emu_lane()] = b;
  w.bar->arrive_and_wait();
  const uint64_t r = w.xch[src % w.size];
  w.bar->arrive_and_wait();
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) {
  return emu_exchange(v, emu_lane() ^ o);
}
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return emu_exchange(v, src);
}
template <class T>
T __shfl_down_sync(unsigned, T v, int o) {
  return emu_exchange(v, emu_lane() + o < 32 ? emu_lane() + o : emu_lane());
}
inline unsigned __ballot_sync(unsigned, bool p) {
  EmuWarp& w = emu_warp();
  w.xch[emu_lane()] = p;
  w.bar->arrive_and_wait();
  unsigned r = 0;
  for (int i = 0; i < w.size; ++i) r |= unsigned(w.xch[i] != 0) << i;
  w.bar->arrive_and_wait();
  return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp().bar->arrive_and_wait(); }
inline void __syncthreads() { emu_block->bar->arrive_and_wait(); }

inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __ffs(unsigned x) { return __builtin_ffs(int(x)); }
template <class A, class B>
auto min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(a) : C(b);
}
template <class A, class B>
auto max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  std::atomic_ref<unsigned> a(*p);
  unsigned old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline float atomicAdd(float* p, float v) {
  std::atomic_ref<float> a(*p);
  return a.fetch_add(v);
}

inline Dim3 emu_dim(Dim3 d) { return d; }
inline Dim3 emu_dim(unsigned d) { return Dim3(d); }
inline Dim3 emu_dim(int d) { return Dim3(unsigned(d)); }
inline Dim3 emu_dim(int64_t d) { return Dim3(unsigned(d)); }
inline Dim3 emu_dim(uint64_t d) { return Dim3(unsigned(d)); }

// Runs a kernel now, on the calling thread's behalf (one kernel at a time: the static "shared" arrays are shared).
template <class K, class... Args>
void emu_run_kernel(Dim3 grid, Dim3 block, size_t smem, K kernel, Args... args) {
  static std::mutex one_at_a_time;
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  EmuBlock b;
  const unsigned nw = (block.x + 31) / 32;
  b.warps.resize(nw);
  for (unsigned w = 0; w < nw; ++w) b.warps[w].size = int(std::min(32u, block.x - w * 32));
  b.smem.assign(smem + 256, 0xff);
  std::barrier<> launch(block.x);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block.x; ++t)
    ts.emplace_back([&, t] {
      gridDim = grid;
      blockDim = block;
      for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
          for (unsigned bx = 0; bx < grid.x; ++bx) {
            if (t == 0) {
              b.bar = std::make_unique<std::barrier<>>(block.x);
              for (auto& w : b.warps) w.bar = std::make_unique<std::barrier<>>(w.size);
            }
            launch.arrive_and_wait();
            blockIdx = Dim3(bx, by, bz);
            threadIdx = Dim3(t);
            emu_block = &b;
            emu_smem_ptr = b.smem.data();
            kernel(args...);
            emu_warp().bar->arrive_and_drop();
            b.bar->arrive_and_drop();
            launch.arrive_and_wait();
          }
    });
  for (auto& t : ts) t.join();
}

template <class K, class... Args>
void emu_launch(Dim3 grid, Dim3 block, size_t smem, CUstream_st* stream, K kernel, Args... args) {
  emu_enqueue(stream, [=] { emu_run_kernel(grid, block, smem, kernel, args...); });
}
