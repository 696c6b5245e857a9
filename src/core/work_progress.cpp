#include "core/work_progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/log.h"
#include "core/units.h"

namespace ms {

WorkProgress::WorkProgress(std::string what, int64_t total, int64_t unit_bytes, int64_t shown_from)
    : what_(std::move(what)),
      total_(total),
      unit_bytes_(unit_bytes),
      shown_(total > 0 && total * unit_bytes >= shown_from),
      tty_(::isatty(2)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (shown_ && !tty_) log_info(what_, ": ", format_bytes(double(total_ * unit_bytes_)));
}

WorkProgress::~WorkProgress() {
  if (!shown_ || !tty_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  show(done_.load(), true);
  std::fprintf(stderr, "\n");
}

void WorkProgress::advance(int64_t n) {
  const int64_t done = done_.fetch_add(n) + n;
  if (!shown_) return;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);  // another thread is drawing: it will be redrawn
  if (lock.owns_lock()) show(done, false);
}

void WorkProgress::show(int64_t done, bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? double(done * unit_bytes_) / secs : 0;
  if (tty_) {
    if (!force && done < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    const int width = 30, filled = int(width * double(done) / double(total_));
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%  %s/s ", what_.c_str(), filled, "##############################",
                 width - filled, "", int(100 * done / total_), format_bytes(rate).c_str());
    std::fflush(stderr);
    return;
  }
  const int quarter = int(4 * done / total_);
  if (quarter <= last_quarter_) return;
  last_quarter_ = quarter;
  log_info(what_, ": ", 25 * quarter, "% in ", format_fixed(secs, 1), " s (", format_bytes(rate), "/s)");
}

}  // namespace ms
