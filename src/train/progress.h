// Training progress: a one-line bar (moving-average loss, it/s, ETA) on a terminal, plain log lines
// every `log_every` steps otherwise.
#pragma once
#include <chrono>
#include <cstdint>

namespace ms {

class Progress {
 public:
  Progress(int64_t first_step, int64_t last_step, int64_t log_every);
  void update(int64_t step, double loss, double tokens_per_second);
  void finish();

 private:
  int64_t first_, last_, log_every_;
  bool tty_;
  double avg_loss_ = 0;
  int64_t seen_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ms
