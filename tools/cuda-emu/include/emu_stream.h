// Streams, events and host memory of the CUDA emulation (emu_core.h): a stream is a thread that runs its work in
// order; an event is a flag its stream sets when the work before it has run; waits enqueue a wait. Device and
// pinned host memory are host memory, with the ranges kept so that cudaPointerGetAttributes can tell them apart.
#pragma once
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

struct CUevent_st {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  void set() {
    {
      const std::lock_guard<std::mutex> l(m);
      done = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return done; });
  }
};

struct CUstream_st {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  bool busy = false, stop = false;
  std::thread worker{[this] { run(); }};
  void run() {
    for (;;) {
      std::function<void()> w;
      {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return stop || !work.empty(); });
        if (work.empty()) return;
        w = std::move(work.front());
        work.pop_front();
        busy = true;
      }
      w();
      {
        const std::lock_guard<std::mutex> l(m);
        busy = false;
      }
      cv.notify_all();
    }
  }
  void push(std::function<void()> w) {
    {
      const std::lock_guard<std::mutex> l(m);
      work.push_back(std::move(w));
    }
    cv.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return work.empty() && !busy; });
  }
  ~CUstream_st() {
    {
      const std::lock_guard<std::mutex> l(m);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
};

struct EmuMemory {
  std::mutex m;
  std::map<const char*, size_t> device, host;  // start -> bytes
  std::set<CUstream_st*> streams;
  static bool in(const std::map<const char*, size_t>& r, const void* p) {
    const char* c = static_cast<const char*>(p);
    auto it = r.upper_bound(c);
    if (it == r.begin()) return false;
    --it;
    return c < it->first + it->second;
  }
};
inline EmuMemory& emu_memory() {
  static EmuMemory m;
  return m;
}

// EMU_SYNC=1 runs every stream's work at once, in the caller's order (a schedule without overlap).
inline void emu_enqueue(CUstream_st* s, std::function<void()> work) {
  static const bool sync = std::getenv("EMU_SYNC") != nullptr;
  if (s && !sync)
    s->push(std::move(work));
  else
    work();
}
