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
static_assert(ms::cuda::NcclApi::kSuccess == ncclSuccess && ms::cuda::NcclApi::kUint8 == ncclUint8 &&
              ms::cuda::NcclApi::kFloat32 == ncclFloat32 &&
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
    : api_(api), comm_(comm), timeout_s_(timeout_s), device_(device_index()) {
  // Rank 0 makes both ids; every rank takes rank 0's part of the control channel's gather.
  const size_t id_bytes = 2 * sizeof(NcclApi::UniqueId);
  std::vector<char> ids(id_bytes * size_t(comm.size()));
  if (comm.rank() == 0) {
    NcclApi::UniqueId w{}, g{};
    check(api_.get_unique_id(&w), "ncclGetUniqueId", Channel::weights);
    check(api_.get_unique_id(&g), "ncclGetUniqueId", Channel::grads);
    std::memcpy(ids.data(), &w, sizeof w);
    std::memcpy(ids.data() + sizeof w, &g, sizeof g);
  }
  comm.allgather(Channel::control, ids.data(), id_bytes);
  NcclApi::UniqueId w{}, g{};
  std::memcpy(&w, ids.data(), sizeof w);
  std::memcpy(&g, ids.data() + sizeof w, sizeof g);
  check(api_.comm_init_rank(&weights_, comm.size(), w, comm.rank()), "ncclCommInitRank", Channel::weights);
  try {
    check(api_.comm_init_rank(&grads_, comm.size(), g, comm.rank()), "ncclCommInitRank", Channel::grads);
  } catch (...) {
    api_.comm_destroy(weights_);
    throw;
  }
  watchdog_ = std::thread([this] { watchdog(); });
}

NcclCollectives::~NcclCollectives() {
  {
    const std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  if (!aborted_) {  // the streams have drained (the backend's sync before this): nothing is in flight
    api_.comm_destroy(weights_);
    api_.comm_destroy(grads_);
  }
}

NcclApi::Comm NcclCollectives::comm_of(Channel c) const {
  MS_CHECK(c == Channel::weights || c == Channel::grads, "NCCL carries the weights and grads channels only");
  return c == Channel::weights ? weights_ : grads_;
}

void NcclCollectives::check(int result, const char* call, Channel c) const {
  if (result == NcclApi::kSuccess) return;
  throw DeviceError(cat("rank ", comm_.rank(), " of ", comm_.size(), ": NCCL's ", call, " failed in ", channel_name(c),
                        ": ", api_.get_error_string(result), " (", result, ")"));
}

void NcclCollectives::allgather(Channel c, void* buf, size_t bytes) {
  char* b = static_cast<char*>(buf);
  check(api_.all_gather(b + size_t(comm_.rank()) * bytes, b, bytes, NcclApi::kUint8, comm_of(c), current_stream()),
        "ncclAllGather", c);
  watch(c);
}

void NcclCollectives::reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight) {
  MS_CHECK(int(weight.size()) == comm_.size(), "a reduce-scatter of ", comm_.size(), " ranks needs as many weights");
  // Each rank's part is multiplied by its own weight as NCCL reads it (a pre-multiplied sum): no pass of its own.
  float mine = weight[size_t(comm_.rank())];
  const NcclApi::Comm comm = comm_of(c);
  int op = 0;
  check(api_.red_op_create_pre_mul_sum(&op, &mine, NcclApi::kFloat32, NcclApi::kScalarHostImmediate, comm),
        "ncclRedOpCreatePreMulSum", c);
  const int rc = api_.reduce_scatter(buf, buf + comm_.rank() * chunk, size_t(chunk), NcclApi::kFloat32, op, comm,
                                     current_stream());
  api_.red_op_destroy(op, comm);  // allowed once the call that takes it has returned
  check(rc, "ncclReduceScatter", c);
  watch(c);
}

void NcclCollectives::watch(Channel c) {
  CUevent_st* e = nullptr;
  MS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  MS_CUDA_CHECK(cudaEventRecord(e, current_stream()));
  const std::lock_guard<std::mutex> l(m_);
  pending_.push_back({c, e, std::chrono::steady_clock::now()});
}

void NcclCollectives::watchdog() {
  cudaSetDevice(device_);  // the events' device
  std::unique_lock<std::mutex> l(m_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(200));
    if (stop_) return;
    if (const std::string why = failure(); !why.empty()) return fail(why);
  }
}

std::string NcclCollectives::failure() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const cudaError_t q = cudaEventQuery(it->done);
    if (q == cudaSuccess) {
      cudaEventDestroy(it->done);
      it = pending_.erase(it);
      continue;
    }
    if (q != cudaErrorNotReady)
      return cat("the GPU failed under ", channel_name(it->channel), ": ", cudaGetErrorString(q));
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - it->enqueued).count() > timeout_s_)
      return cat(channel_name(it->channel), " on the GPUs (NCCL) did not complete within ", timeout_s_,
                 " s (--collective-timeout): a rank died, hangs or is far behind");
    ++it;
  }
  for (Channel c : {Channel::weights, Channel::grads}) {
    int e = NcclApi::kSuccess;
    if (api_.comm_get_async_error(comm_of(c), &e) == NcclApi::kSuccess && e != NcclApi::kSuccess && e != kInProgress)
      return cat("NCCL reports a failure in ", channel_name(c), ": ", api_.get_error_string(e), " (", e, ")");
  }
  return "";
}

void NcclCollectives::abort() noexcept {
  if (aborted_.exchange(true)) return;
  api_.comm_abort(weights_);
  api_.comm_abort(grads_);
}

void NcclCollectives::fail(const std::string& why) noexcept {
  log_line(LogLevel::error, cat("rank ", comm_.rank(), " of ", comm_.size(), ": ", why,
                                ". Every rank stops; the last complete checkpoint is intact"));
  abort();
  comm_.abort(1);
}

}  // namespace ms::cuda
