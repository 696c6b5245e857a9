#include "train/interrupt.h"

#include <atomic>

namespace ms {
namespace {
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }
}  // namespace

InterruptGuard::InterruptGuard() {
  g_interrupted = false;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool InterruptGuard::interrupted() { return g_interrupted; }

}  // namespace ms
