// NCCL between the GPUs of a distributed run (docs/distributed.md): the device collectives StreamedModel calls on the
// CUDA backend (runtime/device_collectives.h). NCCL is loaded with dlopen when a distributed CUDA run starts, as MPI
// is (dist/mpi.h): megaslide never links it, so a single-GPU run and the GPU bundle do not need it, and the 200 MB
// library is whichever the machine has (the CUDA toolkit's, or Python's nvidia-nccl package).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "backend/cuda/device.h"
#include "runtime/communicator.h"
#include "runtime/device_collectives.h"

struct CUevent_st;

namespace ms::cuda {

// The part of NCCL's C API megaslide calls, as function pointers: the library (load_nccl) or a test's stand-in. The
// types are NCCL's ABI (nccl.h; nccl.cpp checks them against the header where the toolkit has one): results, data
// types, reduction ops and scalar residences are C enums passed as int; a communicator is an opaque pointer.
struct NcclApi {
  using Comm = struct NcclComm*;
  struct UniqueId {
    char internal[128];
  };
  // kInProgress: a non-blocking call still running, not a failure
  static constexpr int kSuccess = 0, kInProgress = 7, kUint8 = 1, kFloat32 = 7, kScalarHostImmediate = 1;
  int (*get_version)(int* version);
  int (*get_unique_id)(UniqueId* id);
  int (*comm_init_rank)(Comm* comm, int nranks, UniqueId id, int rank);
  int (*comm_destroy)(Comm comm);
  int (*comm_abort)(Comm comm);
  int (*comm_get_async_error)(Comm comm, int* error);
  const char* (*get_error_string)(int result);
  int (*all_gather)(const void* send, void* recv, size_t count, int type, Comm comm, Stream stream);
  int (*reduce_scatter)(const void* send, void* recv, size_t count, int type, int op, Comm comm, Stream stream);
  int (*red_op_create_pre_mul_sum)(int* op, void* scalar, int type, int residence, Comm comm);
  int (*red_op_destroy)(int op, Comm comm);
};

// NCCL from $MEGASLIDE_NCCL_LIBRARY, else libnccl.so.2 on the loader's path; loaded once. Throws ms::Error naming
// what to do when it cannot be loaded or is older than 2.11 (no pre-multiplied sums).
const NcclApi& load_nccl();

// This rank's device joined to every rank's: one NCCL communicator per channel that carries device collectives
// (weights on the H2D stream, grads on the D2H stream, so that neither orders behind the other), their ids made by
// rank 0 and sent to the others on comm's control channel, and connected by one small collective each before any
// step. The collectives run in place on the current stream (cuda::current_stream, set by CudaBackend::launch). A
// watchdog thread ends the run (comm.abort, after an error naming the rank and the channel) when NCCL reports a
// failure, or when a collective has not completed timeout_s after its stream reached it: a rank that hangs would
// otherwise hold every other GPU in its collective forever.
class NcclCollectives final : public DeviceCollectives {
 public:
  NcclCollectives(const NcclApi& api, Communicator& comm, double timeout_s);
  ~NcclCollectives() override;
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  void allgather(Channel c, void* buf, size_t bytes) override;
  void reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight) override;
  // ncclCommAbort on both communicators. Should the streams then still not drain within kDrainSeconds (an abort
  // that hangs), the watchdog ends the run.
  void abort() noexcept override;
  static constexpr double kDrainSeconds = 30;

 private:
  struct Pending {
    Channel channel;
    CUevent_st *begun, *done;                                      // the stream reached the collective; it completed
    std::optional<std::chrono::steady_clock::time_point> started;  // when the watchdog first saw begun complete
  };
  NcclApi::Comm comm_of(Channel c) const;
  void check(int result, const char* call, const std::string& during) const;
  CUevent_st* record();                      // an event recorded now on the current stream
  void watch(Channel c, CUevent_st* begun);  // the collective just enqueued, for the watchdog
  void watchdog();
  // Why the run must end, from the pending collectives and NCCL; "" when nothing failed. Under m_.
  std::string failure(std::chrono::steady_clock::time_point now);
  void fail(const std::string& why) noexcept;  // ends the run (Communicator::abort)
  void close() noexcept;                       // stops the watchdog and lets the communicators go

  const NcclApi& api_;
  Communicator& comm_;
  double timeout_s_;
  NcclApi::Comm weights_ = nullptr, grads_ = nullptr;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;  // in enqueue order
  bool stop_ = false;
  bool aborted_ = false;  // under m_: the communicators are gone
  std::chrono::steady_clock::time_point aborted_at_;
  std::thread watchdog_;
};

}  // namespace ms::cuda
