// The backend interface (docs/runtime.md): device memory, in-order streams, events, async copies and
// op launches. The scheduler is written against it only, so it runs unchanged on the CPU backend
// (worker threads as streams) and on a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/enum_names.h"

namespace ms {

// The backends there are (src/backend/<kind>/); which of them this build and machine can run: registry/registry.h.
enum class BackendKind { cpu, cuda };
template <>
struct EnumNames<BackendKind> {
  static constexpr std::array<EnumName<BackendKind>, 2> values{
      {{BackendKind::cpu, "cpu"}, {BackendKind::cuda, "cuda"}}};
};

// The backend asked for on the command line: automatic takes cuda where the run can use a GPU.
enum class BackendChoice { automatic, cpu, cuda };
template <>
struct EnumNames<BackendChoice> {
  static constexpr std::array<EnumName<BackendChoice>, 3> values{
      {{BackendChoice::automatic, "auto"}, {BackendChoice::cpu, "cpu"}, {BackendChoice::cuda, "cuda"}}};
};

// Device streams run ops and copies on the device; host streams run host work (the CPU optimizer) in
// order, and may wait on device events and be waited on by device streams. On the CPU backend both are
// worker threads.
enum class StreamKind { device, host };

// Completes when `stream` has finished its first `seq` tasks. A default Event is already complete.
struct Event {
  int stream = -1;
  int64_t seq = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // The arena budget when --device-memory is absent: the device's memory less kDeviceReserve (runtime/arena.h);
  // 0 where the arena lives in host memory (the CPU backend: no limit).
  virtual int64_t default_device_memory() const = 0;

  // The device arena's one allocation (zeroed), and its release.
  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;

  // Creates an in-order stream; work on different streams may overlap.
  virtual int create_stream(const std::string& name, StreamKind kind) = 0;
  // Pins an existing host allocation in place (no second copy), so that copies from and to it run at
  // link speed; it stays pinned until unpin_host or the backend's end. A no-op where there is no link.
  virtual void pin_host(void* p, size_t bytes) = 0;
  // Undoes pin_host(p, ...) before p is freed, once no copy uses it.
  virtual void unpin_host(void* p) = 0;
  // Enqueues an op: fn runs on the device side of `stream` after everything before it.
  virtual void launch(int stream, const char* name, std::function<void()> fn) = 0;
  // Enqueues a copy of `bytes` bytes host -> device / device -> host.
  virtual void copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char* name) = 0;
  virtual void copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char* name) = 0;
  // Enqueues the H2D copy of n bf16 working weights into a weight slot, stored in the dtype the
  // device computes with (weight_bytes() per element: bf16 on a GPU, f32 on the CPU backend).
  virtual void upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char* name) = 0;
  virtual int weight_bytes() const = 0;

  virtual Event record(int stream) = 0;        // an event for everything enqueued so far
  virtual void wait(int stream, Event e) = 0;  // later work on `stream` starts after e
  virtual void sync(Event e) = 0;              // the host blocks until e
  virtual void sync_all() = 0;                 // the host blocks until every stream is idle
};

// Backend::pin_host for a scope: unpinned when it goes (an error then is dropped: the memory is freed after it
// anyway, and a destructor must not throw).
class HostPin {
 public:
  HostPin(Backend& be, void* p, size_t bytes) : be_(&be), p_(p) { be.pin_host(p, bytes); }
  ~HostPin() {
    if (!p_) return;
    try {
      be_->unpin_host(p_);
    } catch (...) {
    }
  }
  HostPin(HostPin&& o) noexcept : be_(o.be_), p_(std::exchange(o.p_, nullptr)) {}
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;
  HostPin& operator=(HostPin&&) = delete;

 private:
  Backend* be_;
  void* p_;
};

}  // namespace ms
