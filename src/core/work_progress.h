// Progress of one long piece of work that is not a training step (initialising or loading a multi-GB model): a bar
// redrawn in place on a terminal, a log line at every quarter otherwise, so that minutes of work never look like a
// hang. Work too small to notice shows nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ms {

class WorkProgress {
 public:
  // `what` names the work ("loading model.safetensors"); `total` units make it whole, `unit_bytes` bytes each;
  // nothing is shown when total * unit_bytes is below `shown_from` bytes.
  WorkProgress(std::string what, int64_t total, int64_t unit_bytes = 1, int64_t shown_from = int64_t(1) << 30);
  ~WorkProgress();  // ends the bar's line
  WorkProgress(const WorkProgress&) = delete;
  WorkProgress& operator=(const WorkProgress&) = delete;

  // n more units done; safe from any thread.
  void advance(int64_t n);

 private:
  void show(int64_t done, bool force);  // force: draw the bar now

  std::string what_;
  int64_t total_, unit_bytes_;
  bool shown_, tty_;
  std::atomic<int64_t> done_{0};
  std::mutex mutex_;      // held while drawing
  int last_quarter_ = 0;  // log lines: the last quarter reported
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace ms
