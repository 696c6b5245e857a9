#include "runtime/host_state.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/parallel.h"

namespace ms {

HostState::HostState(const ParamTable& table, int64_t grad_numel)
    : weights(size_t(table.total())),
      master(size_t(table.total())),
      exp_avg(size_t(table.total())),
      exp_avg_sq(size_t(table.total())),
      grads(size_t(grad_numel)) {}

GradientFloats gradient_floats(const ParamTable& table, OptimizerSchedule schedule, bool streamed, int64_t grad_accum) {
  const int64_t P = table.total(), staging = kImmediateStaging * table.max_stage_numel();
  GradientFloats g;
  if (schedule == OptimizerSchedule::deferred)
    g.pool = P + (streamed && grad_accum > 1 ? staging : 0);
  else if (streamed)
    g.pool = staging;
  if (!streamed && (schedule == OptimizerSchedule::immediate || grad_accum > 1)) g.backward = P;
  return g;
}

void HostState::refresh_weights() {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = numel();
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) weights[size_t(i)] = f32_to_bf16(master[size_t(i)]);
  });
}

}  // namespace ms
