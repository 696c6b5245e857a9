// A stand-in for NCCL's C API (backend/cuda/nccl.h's NcclApi) whose ranks are threads of this process, so that the
// NCCL path's logic (the bootstrap, the in-place offsets, the pre-multiplied sums, StreamedModel's use of them) runs
// without several GPUs, on a GPU or on the emulator. Each collective runs at once on the calling thread: it waits for
// its stream's earlier work, meets the other ranks of its communicator, exchanges through copies and returns; no
// overlap, the same results as NCCL's semantics (nccl.h) define. It checks what NCCL requires of its callers and
// fails the call where they are not met (a collective not in place, a wrong data type, an op of another
// communicator, any call on a communicator destroyed or aborted). `hang` makes its all-gathers stall their stream, as
// a collective whose peer never comes does. Its collectives complete before they return, so it cannot show a missing
// wait between streams after a collective (StreamedModel's compute waits for the H2D stream's event after every
// all-gather, and its D2H copy follows the reduce-scatter on the same stream).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/nccl.h"

namespace ms::cuda {

// The ranks of one fake communicator, met by its unique id.
struct FakeNcclWorld {
  explicit FakeNcclWorld(int n) : ranks(n), sync(n), posted(size_t(n)), scale(size_t(n)) {}
  int ranks;
  std::barrier<> sync;
  std::vector<char*> posted;
  std::vector<float> scale;
};

// NcclApi::Comm points at one of these (the real library's type is opaque to megaslide).
struct NcclComm {
  std::shared_ptr<FakeNcclWorld> world;
  int rank;
  std::map<int, float> ops;  // pre-multiplied sums not yet destroyed: op -> this rank's scalar
  int next_op = 1000;
  std::atomic<int> async_error{0};  // what comm_get_async_error reports (a test may set it while the watchdog reads)
  std::atomic<bool> gone{false};    // destroyed or aborted: every later call on it is a misuse
};

}  // namespace ms::cuda

namespace ms::test {

struct FakeNccl {
  static constexpr int kInvalidArgument = 4, kInvalidUsage = 5;
  static inline std::mutex m;
  static inline std::map<uint64_t, std::shared_ptr<cuda::FakeNcclWorld>> worlds;
  static inline uint64_t next_id = 1;
  static inline std::atomic<int> aborted = 0, destroyed = 0, collectives = 0, misuses = 0;
  static inline bool hang = false;                   // all-gathers stall their stream instead of exchanging
  static inline std::vector<cuda::NcclComm*> comms;  // every communicator made, for tests to inspect

  static cuda::NcclApi api() {
    cuda::NcclApi a{};
    a.get_version = [](int* v) { return *v = 22809, 0; };
    a.get_unique_id = [](cuda::NcclApi::UniqueId* id) {
      const std::lock_guard<std::mutex> l(m);
      *id = {};
      std::memcpy(id->internal, &next_id, sizeof next_id);
      ++next_id;
      return 0;
    };
    a.comm_init_rank = [](cuda::NcclApi::Comm* comm, int n, cuda::NcclApi::UniqueId id, int rank) {
      uint64_t key = 0;
      std::memcpy(&key, id.internal, sizeof key);
      std::shared_ptr<cuda::FakeNcclWorld> w;
      {
        const std::lock_guard<std::mutex> l(m);
        auto& slot = worlds[key];
        if (!slot) slot = std::make_shared<cuda::FakeNcclWorld>(n);
        w = slot;
        if (w->ranks != n || rank < 0 || rank >= n) return kInvalidArgument;
        *comm = new cuda::NcclComm{w, rank, {}};
        comms.push_back(*comm);
      }
      w->sync.arrive_and_wait();  // NCCL's init returns once every rank has joined
      return 0;
    };
    a.comm_destroy = [](cuda::NcclApi::Comm c) { return c->gone.exchange(true) ? misuse() : (++destroyed, 0); };
    a.comm_abort = [](cuda::NcclApi::Comm c) { return c->gone.exchange(true) ? misuse() : (++aborted, 0); };
    a.comm_get_async_error = [](cuda::NcclApi::Comm c, int* e) {
      return c->gone ? misuse() : (*e = c->async_error, 0);
    };
    a.get_error_string = [](int) { return "fake NCCL error"; };
    a.all_gather = [](const void* send, void* recv, size_t count, int type, cuda::NcclApi::Comm c,
                      cuda::Stream stream) {
      char* r = static_cast<char*>(recv);
      if (c->gone) return misuse();
      if (type != cuda::NcclApi::kUint8 || send != r + size_t(c->rank) * count) return kInvalidArgument;
      if (hang) {  // a peer that never comes: the stream stalls on a host function that does not return in time
        MS_CUDA_CHECK(cudaLaunchHostFunc(
            stream, [](void*) { std::this_thread::sleep_for(std::chrono::seconds(30)); }, nullptr));
        return 0;
      }
      cuda_check(cudaStreamSynchronize(stream));
      cuda::FakeNcclWorld& w = *c->world;
      w.posted[size_t(c->rank)] = r;
      w.sync.arrive_and_wait();
      for (int j = 0; j < w.ranks; ++j)
        if (j != c->rank)
          cuda_check(cudaMemcpy(r + size_t(j) * count, w.posted[size_t(j)] + size_t(j) * count, count,
                                cudaMemcpyDeviceToDevice));
      w.sync.arrive_and_wait();
      return count_call();
    };
    a.reduce_scatter = [](const void* send, void* recv, size_t count, int type, int op, cuda::NcclApi::Comm c,
                          cuda::Stream stream) {
      const float* s = static_cast<const float*>(send);
      if (c->gone) return misuse();
      if (type != cuda::NcclApi::kFloat32 || recv != s + size_t(c->rank) * count || !c->ops.count(op))
        return kInvalidArgument;
      cuda_check(cudaStreamSynchronize(stream));
      cuda::FakeNcclWorld& w = *c->world;
      w.posted[size_t(c->rank)] = static_cast<char*>(const_cast<void*>(send));
      w.scale[size_t(c->rank)] = c->ops[op];
      w.sync.arrive_and_wait();
      std::vector<float> sum(count, 0.0f), part(count);
      for (int j = 0; j < w.ranks; ++j) {  // every rank's part of this rank's chunk, pre-multiplied, in rank order
        cuda_check(cudaMemcpy(part.data(), w.posted[size_t(j)] + size_t(c->rank) * count * 4, count * 4,
                              cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; ++i) sum[i] += w.scale[size_t(j)] * part[i];
      }
      w.sync.arrive_and_wait();  // every rank has read before any writes
      cuda_check(cudaMemcpy(recv, sum.data(), count * 4, cudaMemcpyHostToDevice));
      return count_call();
    };
    a.red_op_create_pre_mul_sum = [](int* op, void* scalar, int type, int residence, cuda::NcclApi::Comm c) {
      if (c->gone) return misuse();
      if (type != cuda::NcclApi::kFloat32 || residence != cuda::NcclApi::kScalarHostImmediate) return kInvalidUsage;
      *op = c->next_op++;
      c->ops[*op] = *static_cast<float*>(scalar);
      return 0;
    };
    a.red_op_destroy = [](int op, cuda::NcclApi::Comm c) { return c->ops.erase(op) ? 0 : kInvalidArgument; };
    return a;
  }

  // Forgets every communicator (call between tests).
  static void reset() {
    const std::lock_guard<std::mutex> l(m);
    for (cuda::NcclComm* c : comms) delete c;
    comms.clear();
    worlds.clear();
    aborted = destroyed = collectives = misuses = 0;
    hang = false;
  }

 private:
  static void cuda_check(cudaError_t e) { MS_CUDA_CHECK(e); }
  static int count_call() { return ++collectives, 0; }
  static int misuse() { return ++misuses, kInvalidUsage; }
};

}  // namespace ms::test
