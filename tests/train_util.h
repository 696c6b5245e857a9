// Small, fast training runs for the tests.
#pragma once
#include <string>

#include "core/log.h"
#include "train/options.h"

namespace ms::test {

// Silences info lines for the life of a test.
struct QuietLogs {
  QuietLogs() { set_log_level(LogLevel::error); }
  ~QuietLogs() { set_log_level(LogLevel::info); }
};

// The baseline job (the tiny preset) on `frames` frames of size x size synthetic video, batch 2, checkpoints every 2
// steps, no samples when it ends.
inline TrainOptions small_run(const std::string& out, int64_t steps, int64_t frames = 1, int64_t size = 8,
                              uint64_t seed = 3) {
  TrainOptions o = baseline_job();
  o.frames = frames;
  o.height = size;
  o.width = size;
  o.steps = steps;
  o.batch_size = 2;
  o.save_every = 2;
  o.out = out;
  o.seed = seed;
  o.samples.no_final = true;
  return o;
}

}  // namespace ms::test
