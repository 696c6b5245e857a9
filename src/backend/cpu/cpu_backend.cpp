#include "backend/cpu/cpu_backend.h"

#include <chrono>
#include <cstring>

#include "core/aligned.h"
#include "core/check.h"
#include "core/dtype.h"

namespace ms {

CpuBackend::CpuBackend(double link_gbps, Trace* trace) : link_bytes_per_second_(link_gbps * 1e9), trace_(trace) {
  MS_CHECK(link_gbps >= 0, "--link-gbps must be >= 0, got ", link_gbps);
}

CpuBackend::~CpuBackend() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] {
      for (const auto& s : streams_)
        if (s->done < s->enqueued && !error_) return false;
      return true;
    });
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& s : streams_) s->thread.join();
}

void* CpuBackend::alloc_device(size_t bytes) { return page_alloc(bytes); }
void CpuBackend::free_device(void* p) { page_free(p); }

int CpuBackend::create_stream(const std::string& name, StreamKind) {
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.push_back(std::make_unique<Stream>());
  Stream* s = streams_.back().get();
  s->name = name;
  if (trace_) s->track = trace_->track(name);
  s->thread = std::thread([this, s] { run(s); });
  return int(streams_.size() - 1);
}

void CpuBackend::enqueue(int stream, Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MS_CHECK(stream >= 0 && size_t(stream) < streams_.size(), "no stream ", stream);
    Stream& s = *streams_[size_t(stream)];
    s.queue.push_back(std::move(task));
    ++s.enqueued;
  }
  cv_.notify_all();
}

void CpuBackend::launch(int stream, const char* name, std::function<void()> fn) {
  enqueue(stream, {name, std::move(fn), true});
}

void CpuBackend::launch_always(int stream, const char* name, std::function<void()> fn) {
  enqueue(stream, {name, std::move(fn), false, true});
}

void CpuBackend::throttled(int stream, size_t bytes, const char* name, std::function<void()> body) {
  const double seconds = link_bytes_per_second_ > 0 ? double(bytes) / link_bytes_per_second_ : 0;
  enqueue(stream, {name,
                   [seconds, body = std::move(body)] {
                     const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
                     body();
                     std::this_thread::sleep_until(end);  // the emulated link is no faster than its bandwidth
                   },
                   true});
}

void CpuBackend::copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char* name) {
  throttled(stream, bytes, name, [=] { std::memcpy(dst, src, bytes); });
}
void CpuBackend::copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char* name) {
  throttled(stream, bytes, name, [=] { std::memcpy(dst, src, bytes); });
}
void CpuBackend::upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char* name) {
  throttled(stream, size_t(n) * 2, name, [=] { convert_to_f32(DType::bf16, bf16, static_cast<float*>(slot), n); });
}

Event CpuBackend::record(int stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  return {stream, streams_[size_t(stream)]->enqueued};
}

void CpuBackend::wait(int stream, Event e) {
  if (e.stream < 0 || e.stream == stream) return;  // a stream is already ordered with itself
  Stream* other = streams_[size_t(e.stream)].get();
  enqueue(stream, {"wait",
                   [this, other, e] {
                     std::unique_lock<std::mutex> lock(mutex_);
                     cv_.wait(lock, [&] { return other->done >= e.seq || error_; });
                   },
                   false});
}

void CpuBackend::rethrow() {
  if (error_) std::rethrow_exception(error_);
}

void CpuBackend::sync(Event e) {
  if (e.stream < 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  Stream* s = streams_[size_t(e.stream)].get();
  cv_.wait(lock, [&] { return s->done >= e.seq || error_; });
  rethrow();
}

void CpuBackend::sync_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] {
    for (const auto& s : streams_)
      if (s->done < s->enqueued && !error_) return false;
    return true;
  });
  rethrow();
}

void CpuBackend::run(Stream* s) {
  for (;;) {
    Task task;
    bool failed;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !s->queue.empty(); });
      if (s->queue.empty()) return;
      task = std::move(s->queue.front());
      s->queue.pop_front();
      failed = bool(error_);
    }
    const auto begin = std::chrono::steady_clock::now();
    try {
      if (!failed || task.always) task.fn();  // after a failure the remaining work is dropped
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (trace_ && task.traced) trace_->add(s->track, task.name, begin, std::chrono::steady_clock::now());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++s->done;
    }
    cv_.notify_all();
  }
}

}  // namespace ms
