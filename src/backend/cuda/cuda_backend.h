// The CUDA backend (docs/runtime.md): the arena is one cudaMalloc, device streams are CUDA streams ordered by
// CUDA events, host pools are pinned in place (cudaHostRegister), weights travel as bf16. Host streams
// (the CPU optimizer) are worker threads; a device stream waits for one of them with a stream memory
// operation on a counter in mapped host memory (cuStreamWaitValue32), so no CUDA callback thread can be
// blocked behind another; a host stream waits for a device event with cudaEventSynchronize.
// MEGASLIDE_CUDA_HOST_WAIT=host-sync selects the alternative for a device stream's wait on a host stream: the
// enqueuing thread waits for the host event itself before it enqueues more (no stream memory operation; the GPU may
// idle while the thread waits), for drivers or VMs where the memory wait misbehaves.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/device.h"
#include "runtime/backend.h"

struct CUevent_st;

namespace ms {

// How a device stream waits for a host stream's event (above).
enum class HostWait { stream_memop, host_sync };
// MEGASLIDE_CUDA_HOST_WAIT: unset or "stream-memop", or "host-sync"; anything else is an error naming the choices.
HostWait host_wait_from_environment();

class CudaBackend final : public Backend {
 public:
  // Throws ms::Error when no usable GPU is present.
  explicit CudaBackend(Trace* trace = nullptr);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  BackendKind kind() const override { return BackendKind::cuda; }
  int64_t default_device_memory() const override;
  void* alloc_device(size_t bytes) override;
  void free_device(void* p) override;
  int create_stream(const std::string& name, StreamKind kind) override;
  void pin_host(void* p, size_t bytes) override;
  void unpin_host(void* p) override;
  // Device streams: fn runs now on the calling thread with cuda::current_stream() set to the stream, and
  // enqueues kernels there. Host streams: fn runs on the stream's worker thread, in order.
  void launch(int stream, const char* name, std::function<void()> fn) override;
  void copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char* name) override;
  void copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char* name) override;
  // The slot holds bf16, as the GPU computes with it: a plain copy.
  void upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char* name) override;
  int weight_bytes() const override { return cuda::kComputeBytes; }
  Event record(int stream) override;
  void wait(int stream, Event e) override;
  void sync(Event e) override;
  // Also retires every recorded event: their CUDA events are destroyed and they count as complete.
  void sync_all() override;

  cuda::Stream stream(int id) const;  // a device stream's CUDA stream
  HostWait host_wait() const { return host_wait_; }

 private:
  struct StreamState {
    StreamKind kind;
    cuda::Stream cuda = nullptr;      // device
    std::vector<CUevent_st*> events;  // device: events[seq - 1 - retired]
    int64_t retired = 0;              // device: events up to this seq are known complete
    int host = -1;                    // host: the worker stream in host_
    uint32_t* signal = nullptr;       // host: mapped counter, the last signalled seq
    std::vector<Event> signalled;     // host: signalled[seq - 1], the host_ event of that signal
  };
  StreamState& state(int id);
  const StreamState& state(int id) const;
  void copy(int stream, void* dst, const void* src, size_t bytes);

  std::unique_ptr<CpuBackend> host_;  // the host streams' workers; joined first on destruction
  std::vector<StreamState> streams_;
  std::vector<void*> pinned_;
  HostWait host_wait_ = host_wait_from_environment();
  void* wait_value_ = nullptr;  // the driver's cuStreamWaitValue32 (HostWait::stream_memop)
};

}  // namespace ms
