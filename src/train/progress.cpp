#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/log.h"

namespace ms {

Progress::Progress(int64_t first_step, int64_t last_step, int64_t log_every)
    : first_(first_step),
      last_(last_step),
      log_every_(log_every),
      tty_(::isatty(2)),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t step, double loss, double tokens_per_second) {
  ++seen_;
  const double a = seen_ < 20 ? 1.0 / double(seen_) : 0.05;  // mean at first, then an EMA
  avg_loss_ += a * (loss - avg_loss_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double its = double(step - first_) / secs, eta = double(last_ - step) / std::max(its, 1e-9);
  if (tty_) {
    const int width = 30, filled = int(width * double(step) / double(std::max<int64_t>(last_, 1)));
    std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld loss %.4f  %.2f it/s  %.0f tok/s  ETA %02d:%02d ", filled,
                 "##############################", width - filled, "", static_cast<long long>(step),
                 static_cast<long long>(last_), avg_loss_, its, tokens_per_second, int(eta) / 60, int(eta) % 60);
    std::fflush(stderr);
  } else if (step % log_every_ == 0 || step == last_) {
    log_info("step ", step, "/", last_, " loss ", avg_loss_, " (avg) ", its, " it/s ", int64_t(tokens_per_second),
             " tok/s ETA ", int64_t(eta), " s");
  }
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace ms
