// Ctrl-C during a run: the loop finishes its step, saves and stops (docs/training.md).
#pragma once
#include <signal.h>

namespace ms {

// Installs the SIGINT and SIGTERM handlers for its life (mpirun forwards Ctrl-C to its ranks as SIGTERM) and restores
// the previous ones after; interrupted() says whether either signal arrived since it was made.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool interrupted();

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

}  // namespace ms
