// The CPU backend: "device" memory is host memory, each stream is a worker thread running its
// tasks in order, events are (stream, task count) pairs, and copies can be throttled to a link
// bandwidth (--link-gbps) to emulate PCIe, so the streaming scheduler runs and is tested without a GPU.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_stage_runner.h"
#include "runtime/backend.h"
#include "runtime/trace.h"

namespace ms {

class CpuBackend final : public Backend {
 public:
  // link_gbps: copy bandwidth in GB/s per direction (0: unthrottled memcpy). trace may be null.
  explicit CpuBackend(double link_gbps = 0, Trace* trace = nullptr);
  ~CpuBackend() override;

  BackendKind kind() const override { return BackendKind::cpu; }
  int64_t default_device_memory() const override { return 0; }
  void* alloc_device(size_t bytes) override;
  void free_device(void* p) override;
  int create_stream(const std::string& name, StreamKind kind) override;
  void pin_host(void*, size_t) override {}
  void unpin_host(void*) override {}
  void launch(int stream, const char* name, std::function<void()> fn) override;
  // Like launch, but fn runs even after an earlier task failed (the rest are then dropped): for signals
  // that other work waits on, so that a failure cannot leave it waiting. fn must not throw.
  void launch_always(int stream, const char* name, std::function<void()> fn);
  void copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char* name) override;
  void copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char* name) override;
  // Widens bf16 to f32 while copying; the link is charged for the bf16 bytes.
  void upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char* name) override;
  int weight_bytes() const override { return kCpuComputeBytes; }
  Event record(int stream) override;
  void wait(int stream, Event e) override;
  // sync and sync_all rethrow the first exception a task threw.
  void sync(Event e) override;
  void sync_all() override;

 private:
  struct Task {
    const char* name;
    std::function<void()> fn;
    bool traced;
    bool always = false;  // runs after a failure too
  };
  struct Stream {
    std::string name;
    std::deque<Task> queue;
    int64_t enqueued = 0, done = 0;
    int track = -1;
    std::thread thread;
  };
  void enqueue(int stream, Task task);
  // Runs `body` on the stream, taking at least `bytes` / link bandwidth seconds.
  void throttled(int stream, size_t bytes, const char* name, std::function<void()> body);
  void run(Stream* s);
  void rethrow();

  double link_bytes_per_second_;
  Trace* trace_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::exception_ptr error_;
  bool stopping_ = false;
};

}  // namespace ms
