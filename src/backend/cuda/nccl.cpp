#include "backend/cuda/nccl.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/check.h"
#include "core/log.h"

#if __has_include(<nccl.h>)  // the toolkit's header: NcclApi's ABI constants are NCCL's
#include <nccl.h>
static_assert(ms::cuda::NcclApi::kSuccess == ncclSuccess && ms::cuda::NcclApi::kInProgress == ncclInProgress &&
              ms::cuda::NcclApi::kUint8 == ncclUint8 && ms::cuda::NcclApi::kFloat32 == ncclFloat32 &&
              ms::cuda::NcclApi::kScalarHostImmediate == ncclScalarHostImmediate);
static_assert(sizeof(ms::cuda::NcclApi::UniqueId) == sizeof(ncclUniqueId) && sizeof(ncclResult_t) == sizeof(int) &&
              sizeof(ncclDataType_t) == sizeof(int) && sizeof(ncclRedOp_t) == sizeof(int) &&
              sizeof(ncclScalarResidence_t) == sizeof(int));
#endif

namespace ms::cuda {
namespace {

constexpr int kInProgress = 7;            // ncclInProgress: a non-blocking call still running, not a failure
constexpr int kPreMulSumVersion = 21100;  // ncclRedOpCreatePreMulSum came with NCCL 2.11

const char* channel_name(Channel c) {
  return c == Channel::weights ? "a weight all-gather" : c == Channel::grads ? "a gradient reduce-scatter" : "?";
}

template <class F>
void resolve(void* lib, const char* name, F& f, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) MS_FAIL(path, " has no ", name, ": it is not NCCL, or too old a one (2.11 or newer is needed)");
}

NcclApi open_nccl() {
  const char* env = std::getenv("MEGASLIDE_NCCL_LIBRARY");
  const std::string path = env && *env ? env : "libnccl.so.2";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    MS_FAIL("a distributed run on the cuda backend needs NCCL, and ", path, " cannot be loaded (", dlerror(),
            "): install NCCL (the CUDA toolkit's or Python's nvidia-nccl-cu13), add its folder to "
            "LD_LIBRARY_PATH or set MEGASLIDE_NCCL_LIBRARY to the library's path; or run the ranks with --backend cpu");
  NcclApi a{};
  resolve(lib, "ncclGetVersion", a.get_version, path);
  resolve(lib, "ncclGetUniqueId", a.get_unique_id, path);
  resolve(lib, "ncclCommInitRank", a.comm_init_rank, path);
  resolve(lib, "ncclCommDestroy", a.comm_destroy, path);
  resolve(lib, "ncclCommAbort", a.comm_abort, path);
  resolve(lib, "ncclCommGetAsyncError", a.comm_get_async_error, path);
  resolve(lib, "ncclGetErrorString", a.get_error_string, path);
  resolve(lib, "ncclAllGather", a.all_gather, path);
  resolve(lib, "ncclReduceScatter", a.reduce_scatter, path);
  resolve(lib, "ncclRedOpCreatePreMulSum", a.red_op_create_pre_mul_sum, path);
  resolve(lib, "ncclRedOpDestroy", a.red_op_destroy, path);
  int version = 0;
  if (a.get_version(&version) != NcclApi::kSuccess || version < kPreMulSumVersion)
    MS_FAIL(path, " is NCCL ", version, "; megaslide needs 2.11 or newer (pre-multiplied sums)");
  log_debug("NCCL ", version, " from ", path);
  return a;  // the library stays loaded for the process's life
}

}  // namespace

const NcclApi& load_nccl() {
  static const NcclApi api = open_nccl();
  return api;
}

NcclCollectives::NcclCollectives(const NcclApi& api, Communicator& comm, double timeout_s)
    : api_(api), comm_(comm), timeout_s_(timeout_s) {
  // Rank 0 makes both ids; every rank takes rank 0's part of the control channel's gather.
  const size_t id_bytes = 2 * sizeof(NcclApi::UniqueId);
  std::vector<char> ids(id_bytes * size_t(comm.size()));
  if (comm.rank() == 0) {
    NcclApi::UniqueId w{}, g{};
    check(api_.get_unique_id(&w), "ncclGetUniqueId", "making the weights channel's id");
    check(api_.get_unique_id(&g), "ncclGetUniqueId", "making the grads channel's id");
    std::memcpy(ids.data(), &w, sizeof w);
    std::memcpy(ids.data() + sizeof w, &g, sizeof g);
  }
  comm.allgather(Channel::control, ids.data(), id_bytes);
  NcclApi::UniqueId w{}, g{};
  std::memcpy(&w, ids.data(), sizeof w);
  std::memcpy(&g, ids.data() + sizeof w, sizeof g);
  check(api_.comm_init_rank(&weights_, comm.size(), w, comm.rank()), "ncclCommInitRank",
        "joining the weights channel's communicator");
  try {
    check(api_.comm_init_rank(&grads_, comm.size(), g, comm.rank()), "ncclCommInitRank",
          "joining the grads channel's communicator");
  } catch (...) {
    api_.comm_destroy(weights_);
    throw;
  }
  watchdog_ = std::thread([this] { watchdog(); });
  // NCCL connects the ranks (and allocates for it) at a communicator's first collective: one of each here, on a
  // stream of their own, so that no step's collective waits for that or syncs the device in the middle of a step.
  Stream stream = nullptr;
  float* buf = nullptr;  // [ranks] one float each
  const Stream before = current_stream();
  try {
    MS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), size_t(comm.size()) * 4));
    set_current_stream(stream);
    MS_CUDA_CHECK(cudaMemsetAsync(buf, 0, size_t(comm.size()) * 4, stream));
    allgather(Channel::weights, buf, 4);
    reduce_scatter(Channel::grads, buf, 1, std::vector<float>(size_t(comm.size()), 1.0f));
    MS_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {  // buf and stream are left: freeing them could wait for the collectives that failed
    set_current_stream(before);
    abort();
    close();
    throw;
  }
  set_current_stream(before);
  cudaFree(buf);
  cudaStreamDestroy(stream);
}

NcclCollectives::~NcclCollectives() { close(); }

void NcclCollectives::close() noexcept {
  {
    const std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.begun), cudaEventDestroy(p.done);
  if (!aborted_) {  // the streams have drained (the backend's sync before this): nothing is in flight
    api_.comm_destroy(weights_);
    api_.comm_destroy(grads_);
  }
}

NcclApi::Comm NcclCollectives::comm_of(Channel c) const {
  MS_CHECK(c == Channel::weights || c == Channel::grads, "NCCL carries the weights and grads channels only");
  return c == Channel::weights ? weights_ : grads_;
}

void NcclCollectives::check(int result, const char* call, const std::string& during) const {
  if (result == NcclApi::kSuccess) return;
  throw DeviceError(cat("rank ", comm_.rank(), " of ", comm_.size(), ": NCCL's ", call, " failed ", during, ": ",
                        api_.get_error_string(result), " (", result, ")"));
}

CUevent_st* NcclCollectives::record() {
  CUevent_st* e = nullptr;
  MS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  MS_CUDA_CHECK(cudaEventRecord(e, current_stream()));
  return e;
}

void NcclCollectives::allgather(Channel c, void* buf, size_t bytes) {
  char* b = static_cast<char*>(buf);
  CUevent_st* begun = record();
  check(api_.all_gather(b + size_t(comm_.rank()) * bytes, b, bytes, NcclApi::kUint8, comm_of(c), current_stream()),
        "ncclAllGather", cat("in ", channel_name(c)));
  watch(c, begun);
}

void NcclCollectives::reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight) {
  MS_CHECK(int(weight.size()) == comm_.size(), "a reduce-scatter of ", comm_.size(), " ranks needs as many weights");
  // Each rank's part is multiplied by its own weight as NCCL reads it (a pre-multiplied sum): no pass of its own.
  float mine = weight[size_t(comm_.rank())];
  const NcclApi::Comm comm = comm_of(c);
  int op = 0;
  check(api_.red_op_create_pre_mul_sum(&op, &mine, NcclApi::kFloat32, NcclApi::kScalarHostImmediate, comm),
        "ncclRedOpCreatePreMulSum", cat("in ", channel_name(c)));
  CUevent_st* begun = record();
  const int rc = api_.reduce_scatter(buf, buf + comm_.rank() * chunk, size_t(chunk), NcclApi::kFloat32, op, comm,
                                     current_stream());
  api_.red_op_destroy(op, comm);  // allowed once the call that takes it has returned
  check(rc, "ncclReduceScatter", cat("in ", channel_name(c)));
  watch(c, begun);
}

void NcclCollectives::watch(Channel c, CUevent_st* begun) {
  CUevent_st* done = record();
  const std::lock_guard<std::mutex> l(m_);
  pending_.push_back({c, begun, done, {}});
}

void NcclCollectives::watchdog() {
  try {
    use_device_on_this_thread();  // the events' device
  } catch (const Error& e) {
    return fail(e.what());
  }
  std::unique_lock<std::mutex> l(m_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(200));
    if (stop_) return;
    const auto now = std::chrono::steady_clock::now();
    if (aborted_) {  // the communicators are gone: only the drain's deadline is left to watch
      if (std::chrono::duration<double>(now - aborted_at_).count() > kDrainSeconds)
        return fail(cat("after an error of its own it could not drain its GPU streams within ", kDrainSeconds,
                        " s (its message may be lost)"));
      continue;
    }
    if (const std::string why = failure(now); !why.empty()) return fail(why);
  }
}

std::string NcclCollectives::failure(std::chrono::steady_clock::time_point now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const cudaError_t done = cudaEventQuery(it->done);
    if (done == cudaSuccess) {
      cudaEventDestroy(it->begun);
      cudaEventDestroy(it->done);
      it = pending_.erase(it);
      continue;
    }
    if (done != cudaErrorNotReady)
      return cat("the GPU failed while ", channel_name(it->channel), " was pending: ", cudaGetErrorString(done));
    // The clock runs from when the stream reached the collective, as a rank's wait in a collective on the CPU does.
    if (!it->started && cudaEventQuery(it->begun) == cudaSuccess) it->started = now;
    if (it->started && std::chrono::duration<double>(now - *it->started).count() > timeout_s_)
      return cat(channel_name(it->channel), " on the GPUs (NCCL) did not complete within ", timeout_s_,
                 " s (--collective-timeout): a rank died, hangs or is far behind");
    ++it;
  }
  for (Channel c : {Channel::weights, Channel::grads}) {
    int e = NcclApi::kSuccess;
    if (api_.comm_get_async_error(comm_of(c), &e) == NcclApi::kSuccess && e != NcclApi::kSuccess &&
        e != NcclApi::kInProgress)
      return cat("NCCL reports a failure in ", channel_name(c), ": ", api_.get_error_string(e), " (", e, ")");
  }
  return "";
}

void NcclCollectives::abort() noexcept {
  {  // the watchdog stops touching the communicators before they go
    const std::lock_guard<std::mutex> l(m_);
    if (aborted_) return;
    aborted_ = true;
    aborted_at_ = std::chrono::steady_clock::now();
  }
  api_.comm_abort(weights_);
  api_.comm_abort(grads_);
}

void NcclCollectives::fail(const std::string& why) noexcept {
  // No ncclCommAbort here: it can itself wait for the kernels that hang; the job's end takes the GPU state with it.
  log_line(LogLevel::error, cat("rank ", comm_.rank(), " of ", comm_.size(), ": ", why,
                                ". Every rank stops; the last complete checkpoint is intact"));
  comm_.abort(1);
}

}  // namespace ms::cuda
