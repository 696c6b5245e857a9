// CPU emulation of the CUDA subset megaslide's kernels use (tools/cuda-emu/run.sh, docs/cuda.md): a block's threads are
// fibers scheduled in a seeded random order (below), __syncthreads a block barrier, warp intrinsics a warp barrier;
// blocks run one after another (so static "shared" arrays are per block). Device memory is host memory.
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
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

// The schedule: a block's threads are fibers of the launching thread, run one at a time; at every barrier, shuffle and
// warp-wide instruction the thread to run next is drawn from a seeded generator, so that a missing barrier shows as a
// read of poisoned shared memory or of a value not yet written, the same way for a seed (MEGASLIDE_EMU_SEED) and
// differently between runs. Blocks run one after another in a shuffled order, their shared memory, dynamic and static,
// poisoned before each (0xff bytes: NaN in fp32 and bf16).
struct EmuSync {  // a barrier among the live threads of a block or of a warp
  int expected = 0;
  std::vector<int> waiting;
};
struct EmuCopy {  // one cp.async: where it writes, and what, at its group's wait
  unsigned char* dst;
  unsigned char bytes[16];
};
struct EmuFiber {
  ucontext_t ctx;
  bool done = false;
  std::vector<EmuCopy> open;                 // cp.async since the last commit
  std::deque<std::vector<EmuCopy>> pending;  // committed groups, oldest first
};
struct EmuWarp {
  EmuSync sync;
  uint64_t xch[32];
  uint32_t regs[32][12];  // the operands of a warp-wide instruction (mma, ldmatrix), a row per lane
  int size = 32;
};
struct EmuBlock {
  EmuSync sync;
  std::vector<EmuWarp> warps;
  std::vector<unsigned char> smem;
  std::vector<EmuFiber> fibers;
  std::vector<int> runnable;
  int current = 0;
  ucontext_t scheduler, fresh;
};
inline thread_local EmuBlock* emu_block;
inline thread_local unsigned char* emu_smem_ptr;
inline EmuWarp& emu_warp() { return emu_block->warps[threadIdx.x / 32]; }
inline int emu_lane() { return int(threadIdx.x % 32); }
inline EmuFiber& emu_fiber() { return emu_block->fibers[size_t(emu_block->current)]; }

// Hands the turn back to the scheduler; this thread goes on when the scheduler draws it again.
inline void emu_yield() { swapcontext(&emu_fiber().ctx, &emu_block->scheduler); }
inline void emu_release(EmuSync& s) {
  for (int f : s.waiting) emu_block->runnable.push_back(f);
  s.waiting.clear();
}
// A barrier: the last of its live threads to arrive releases them all.
inline void emu_arrive(EmuSync& s) {
  s.waiting.push_back(emu_block->current);
  if (int(s.waiting.size()) >= s.expected) emu_release(s);
  emu_yield();
}
// A thread that returns leaves its barriers, which its arrival-less absence may complete.
inline void emu_leave(EmuSync& s) {
  --s.expected;
  if (!s.waiting.empty() && int(s.waiting.size()) >= s.expected) emu_release(s);
}

// The kernels' static __shared__ arrays (translate.py registers each at its first use), poisoned with the rest.
struct EmuRange {
  void* p;
  size_t n;
};
inline std::vector<EmuRange>& emu_statics() {
  static std::vector<EmuRange> v;
  return v;
}
inline bool emu_shared_static(std::initializer_list<EmuRange> arrays) {
  for (const EmuRange& a : arrays) {
    std::memset(a.p, 0xff, a.n);
    emu_statics().push_back(a);
  }
  return true;
}
// Whether [p, p + n) lies in this block's shared memory: what ldmatrix and cp.async may address.
inline bool emu_in_shared(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  const auto in = [&](const void* a, size_t m) {
    const auto* s = static_cast<const unsigned char*>(a);
    return c >= s && c + n <= s + m;
  };
  if (in(emu_block->smem.data(), emu_block->smem.size())) return true;
  for (const EmuRange& a : emu_statics())
    if (in(a.p, a.n)) return true;
  return false;
}
[[noreturn]] inline void emu_fail(const char* what) {
  std::fprintf(stderr, "cuda-emu: block (%u,%u,%u) thread %u: %s\n", blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
               what);
  std::abort();
}

template <class T>
T emu_exchange(T v, int src) {
  EmuWarp& w = emu_warp();
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  w.xch[emu_lane()] = b;
  emu_arrive(w.sync);
  const uint64_t r = w.xch[src % w.size];
  emu_arrive(w.sync);
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
  emu_arrive(w.sync);
  unsigned r = 0;
  for (int i = 0; i < w.size; ++i) r |= unsigned(w.xch[i] != 0) << i;
  emu_arrive(w.sync);
  return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { emu_arrive(emu_warp().sync); }
inline void __syncthreads() { emu_arrive(emu_block->sync); }

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

// The schedule's generator: seeded by MEGASLIDE_EMU_SEED, else afresh, the seed printed once so a run can be replayed.
inline std::mt19937_64& emu_rng() {
  static std::mt19937_64 rng([] {
    const char* e = std::getenv("MEGASLIDE_EMU_SEED");
    const uint64_t seed = e && *e ? std::strtoull(e, nullptr, 10) : uint64_t(std::random_device{}());
    std::fprintf(stderr, "cuda-emu: schedule seed %llu (MEGASLIDE_EMU_SEED=%llu replays it)\n",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
    return seed;
  }());
  return rng;
}
// A fiber's stack, kept between launches, above a guard page that turns an overflow into a crash.
inline char* emu_stack(size_t i, size_t bytes) {
  static std::vector<char*> stacks;
  while (stacks.size() <= i) {
    void* p = mmap(nullptr, bytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || mprotect(p, 4096, PROT_NONE) != 0) {
      std::perror("cuda-emu: a fiber stack");
      std::abort();
    }
    stacks.push_back(static_cast<char*>(p) + 4096);
  }
  return stacks[i];
}
inline thread_local const std::function<void()>* emu_body;
inline void emu_fiber_main() {
  (*emu_body)();
  emu_leave(emu_warp().sync);
  emu_leave(emu_block->sync);
  emu_fiber().done = true;  // cp.async never waited for are dropped: their destinations stay poisoned
}

// One kernel at a time in the process, whichever stream runs it: the static "shared" arrays, the poisoning of all of
// them, the fiber stacks and the schedule's generator are shared.
inline std::mutex& emu_one_kernel_at_a_time() {
  static std::mutex m;
  return m;
}

// Runs a kernel now, on the calling thread's behalf.
template <class K, class... Args>
void emu_run_kernel(Dim3 grid, Dim3 block, size_t smem, K kernel, Args... args) {
  const std::lock_guard<std::mutex> lock(emu_one_kernel_at_a_time());
  constexpr size_t kStack = 256 << 10;
  std::mt19937_64& rng = emu_rng();
  EmuBlock b;
  const unsigned nw = (block.x + 31) / 32;
  b.warps.resize(nw);
  b.fibers.resize(block.x);
  getcontext(&b.fresh);
  const std::function<void()> body = [&] { kernel(args...); };
  emu_body = &body;
  emu_block = &b;
  gridDim = grid;
  blockDim = block;
  std::vector<unsigned> order(size_t(grid.x) * grid.y * grid.z);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  for (const unsigned id : order) {
    blockIdx = Dim3(id % grid.x, id / grid.x % grid.y, id / grid.x / grid.y);
    b.smem.assign(smem + 256, 0xff);
    emu_smem_ptr = b.smem.data();
    for (const EmuRange& a : emu_statics()) std::memset(a.p, 0xff, a.n);
    b.sync = {int(block.x), {}};
    for (unsigned w = 0; w < nw; ++w) {
      b.warps[w].size = int(std::min(32u, block.x - w * 32));
      b.warps[w].sync = {b.warps[w].size, {}};
    }
    b.runnable.clear();
    for (unsigned t = 0; t < block.x; ++t) {
      EmuFiber& f = b.fibers[t];
      f.done = false;
      f.open.clear();
      f.pending.clear();
      f.ctx = b.fresh;
      f.ctx.uc_stack.ss_sp = emu_stack(t, kStack);
      f.ctx.uc_stack.ss_size = kStack;
      f.ctx.uc_link = &b.scheduler;
      makecontext(&f.ctx, emu_fiber_main, 0);
      b.runnable.push_back(int(t));
    }
    while (!b.runnable.empty()) {
      const size_t i = size_t(rng() % b.runnable.size());
      b.current = b.runnable[i];
      b.runnable[i] = b.runnable.back();
      b.runnable.pop_back();
      threadIdx = Dim3(unsigned(b.current));
      swapcontext(&b.scheduler, &b.fibers[size_t(b.current)].ctx);
    }
    for (unsigned t = 0; t < block.x; ++t)
      if (!b.fibers[t].done) {
        threadIdx = Dim3(t);
        emu_fail("deadlocked: waits at a barrier that the block's other threads never reach");
      }
  }
}

template <class K, class... Args>
void emu_launch(Dim3 grid, Dim3 block, size_t smem, CUstream_st* stream, K kernel, Args... args) {
  emu_enqueue(stream, [=] { emu_run_kernel(grid, block, smem, kernel, args...); });
}
