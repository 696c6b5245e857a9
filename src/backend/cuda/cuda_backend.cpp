#include "backend/cuda/cuda_backend.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/check.h"
#include "backend/cuda/device.h"
#include "core/text.h"
#include "core/units.h"
#include "runtime/arena.h"

namespace ms {
namespace {

using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

}  // namespace

HostWait host_wait_from_environment() {
  const char* v = std::getenv("MEGASLIDE_CUDA_HOST_WAIT");
  if (!v || !*v || std::string_view(v) == "stream-memop") return HostWait::stream_memop;
  if (std::string_view(v) == "host-sync") return HostWait::host_sync;
  MS_FAIL("MEGASLIDE_CUDA_HOST_WAIT must be stream-memop (the default) or host-sync, not ", quote_text(v, 40));
}

CudaBackend::CudaBackend(Trace* trace) : host_(std::make_unique<CpuBackend>(0, trace)) {
  cuda::device_info();  // throws, naming the reason, without a usable GPU
  MS_CUDA_CHECK(cudaSetDevice(cuda::device_index()));
  if (host_wait_ == HostWait::host_sync) return;
  cudaDriverEntryPointQueryResult found{};
  MS_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait_value_, 11070, cudaEnableDefault, &found));
  MS_CHECK(found == cudaDriverEntryPointSuccess && wait_value_, "the CUDA driver has no cuStreamWaitValue32");
}

CudaBackend::~CudaBackend() {
  try {
    sync_all();
  } catch (...) {  // the error is already on its way out through an earlier sync
  }
  // After a failure sync_all returns early: join the host workers (every task has run or been dropped, and
  // every signal has run, so no device stream still waits on a counter), then let the device drain.
  host_.reset();
  cudaDeviceSynchronize();
  for (StreamState& s : streams_) {
    for (CUevent_st* e : s.events) cudaEventDestroy(e);
    if (s.cuda) cudaStreamDestroy(s.cuda);
    if (s.signal) cudaFreeHost(s.signal);
  }
  for (void* p : pinned_) cudaHostUnregister(p);
}

CudaBackend::StreamState& CudaBackend::state(int id) {
  MS_CHECK(id >= 0 && size_t(id) < streams_.size(), "no stream ", id);
  return streams_[size_t(id)];
}
const CudaBackend::StreamState& CudaBackend::state(int id) const {
  MS_CHECK(id >= 0 && size_t(id) < streams_.size(), "no stream ", id);
  return streams_[size_t(id)];
}

int64_t CudaBackend::default_device_memory() const { return cuda::device_info().memory_bytes - kDeviceReserve; }

void* CudaBackend::alloc_device(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    // The arena is the plan's peak whatever the budget, so only a smaller step (or more free memory) helps.
    MS_FAIL("the device arena of ", format_bytes(double(bytes)), " does not fit: the GPU has ",
            format_bytes(double(free)), " of ", format_bytes(double(total)), " free",
            free + (1 << 30) < total ? " (other processes hold the rest)" : "",
            "; shrink the step: --offload-activations (block inputs in host memory), fewer frames or a lower "
            "resolution, a smaller --batch-size, or --prefetch 2; `megaslide plan` shows what fits");
  }
  MS_CUDA_CHECK(e);
  // The memset runs on the legacy stream, which the backend's non-blocking streams do not wait for.
  MS_CUDA_CHECK(cudaMemset(p, 0, bytes));
  MS_CUDA_CHECK(cudaDeviceSynchronize());
  return p;
}

void CudaBackend::free_device(void* p) { MS_CUDA_CHECK(cudaFree(p)); }

int CudaBackend::create_stream(const std::string& name, StreamKind kind) {
  StreamState s;
  s.kind = kind;
  if (kind == StreamKind::device) {
    MS_CUDA_CHECK(cudaStreamCreateWithFlags(&s.cuda, cudaStreamNonBlocking));
  } else {
    s.host = host_->create_stream(name, StreamKind::host);
    MS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&s.signal), sizeof(uint32_t), cudaHostAllocMapped));
    *s.signal = 0;
  }
  streams_.push_back(std::move(s));
  return int(streams_.size() - 1);
}

void CudaBackend::pin_host(void* p, size_t bytes) {
  MS_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
  pinned_.push_back(p);
}

void CudaBackend::unpin_host(void* p) {
  const auto it = std::find(pinned_.begin(), pinned_.end(), p);
  MS_CHECK(it != pinned_.end(), "unpin_host: the buffer was not pinned by this backend");
  pinned_.erase(it);
  MS_CUDA_CHECK(cudaHostUnregister(p));
}

cuda::Stream CudaBackend::stream(int id) const {
  const StreamState& s = state(id);
  MS_CHECK(s.kind == StreamKind::device, "stream ", id, " is a host stream");
  return s.cuda;
}

void CudaBackend::launch(int stream, const char* name, std::function<void()> fn) {
  StreamState& s = state(stream);
  if (s.kind == StreamKind::host) return host_->launch(s.host, name, std::move(fn));
  const cuda::Stream before = cuda::current_stream();
  cuda::set_current_stream(s.cuda);
  try {
    fn();
  } catch (...) {
    cuda::set_current_stream(before);
    throw;
  }
  cuda::set_current_stream(before);
}

void CudaBackend::copy(int stream, void* dst, const void* src, size_t bytes) {
  // A pageable host side would make the copy synchronous and silently end every overlap.
  for (const void* p : {static_cast<const void*>(dst), src}) {
    cudaPointerAttributes a{};
    MS_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    MS_CHECK(a.type != cudaMemoryTypeUnregistered, "a host buffer of a ", bytes,
             "-byte copy is not pinned: pin_host() the pool it belongs to");
  }
  MS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, this->stream(stream)));
}
void CudaBackend::copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char*) {
  copy(stream, dst, src, bytes);
}
void CudaBackend::copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char*) {
  copy(stream, dst, src, bytes);
}
void CudaBackend::upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char*) {
  copy(stream, slot, bf16, size_t(n) * 2);
}

Event CudaBackend::record(int stream) {
  StreamState& s = state(stream);
  if (s.kind == StreamKind::device) {
    cudaEvent_t e = nullptr;
    // Blocking sync: a host waiting on it (sync, a host stream's wait) sleeps instead of spinning a core
    // that the CPU optimizer needs.
    MS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync));
    MS_CUDA_CHECK(cudaEventRecord(e, s.cuda));
    s.events.push_back(e);
    return {stream, s.retired + int64_t(s.events.size())};
  }
  // A host stream signals in order: its counter reaches seq once every task before the signal has run (or
  // was dropped after a failure: device streams waiting on it must not hang, the failure is rethrown by sync).
  const int64_t seq = int64_t(s.signalled.size()) + 1;
  MS_CHECK(seq < (int64_t(1) << 31), "host stream ", stream, " signalled too often");
  host_->launch_always(s.host, "signal", [counter = s.signal, seq] {
    std::atomic_ref<uint32_t>(*counter).store(uint32_t(seq), std::memory_order_release);
    std::atomic_ref<uint32_t>(*counter).notify_all();  // HostWait::host_sync waits on it
  });
  s.signalled.push_back(host_->record(s.host));
  return {stream, seq};
}

void CudaBackend::wait(int stream, Event e) {
  if (e.stream < 0 || e.stream == stream) return;
  StreamState& s = state(stream);
  StreamState& from = state(e.stream);
  if (from.kind == StreamKind::host) {
    const Event signalled = from.signalled[size_t(e.seq - 1)];
    if (s.kind == StreamKind::host) return host_->wait(s.host, signalled);
    if (host_wait_ == HostWait::host_sync) {
      // The counter, not host_->sync: the signal comes after a failed task too, whose error sync() rethrows later.
      std::atomic_ref<uint32_t> counter(*from.signal);
      for (uint32_t v = counter.load(std::memory_order_acquire); v < uint32_t(e.seq);
           v = counter.load(std::memory_order_acquire))
        counter.wait(v, std::memory_order_acquire);
      return;
    }
    void* counter = nullptr;
    MS_CUDA_CHECK(cudaHostGetDevicePointer(&counter, from.signal, 0));
    const CUresult r = reinterpret_cast<WaitValue32>(wait_value_)(s.cuda, CUdeviceptr(counter), cuuint32_t(e.seq),
                                                                  CU_STREAM_WAIT_VALUE_GEQ);
    MS_CHECK(r == CUDA_SUCCESS, "cuStreamWaitValue32 failed with CUresult ", int(r));
    return;
  }
  if (e.seq <= from.retired) return;  // known complete
  cudaEvent_t ev = from.events[size_t(e.seq - 1 - from.retired)];
  if (s.kind == StreamKind::device) {
    MS_CUDA_CHECK(cudaStreamWaitEvent(s.cuda, ev, 0));
    return;
  }
  host_->launch(s.host, "wait", [ev] {
    cuda::use_device_on_this_thread();  // a worker thread's first CUDA call would otherwise open a context on GPU 0
    MS_CUDA_CHECK(cudaEventSynchronize(ev));
  });
}

void CudaBackend::sync(Event e) {
  if (e.stream < 0) return;
  StreamState& s = state(e.stream);
  if (s.kind == StreamKind::host) return host_->sync(s.signalled[size_t(e.seq - 1)]);
  if (e.seq <= s.retired) return;
  MS_CUDA_CHECK(cudaEventSynchronize(s.events[size_t(e.seq - 1 - s.retired)]));
}

void CudaBackend::sync_all() {
  host_->sync_all();  // host tasks wait only on device events, which complete on their own
  MS_CUDA_CHECK(cudaDeviceSynchronize());
  for (StreamState& s : streams_) {
    for (CUevent_st* e : s.events) MS_CUDA_CHECK(cudaEventDestroy(e));
    s.retired += int64_t(s.events.size());
    s.events.clear();
  }
}

}  // namespace ms
