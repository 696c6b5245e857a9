#include "runtime/host_state.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/parallel.h"

namespace ms {

HostState::HostState(int64_t numel, int64_t grad_numel)
    : weights(size_t(numel)), master(size_t(numel)), exp_avg(size_t(numel)), exp_avg_sq(size_t(numel)),
      grads(size_t(grad_numel)) {}

GradientFloats gradient_floats(const ParamTable& table, const Shards& shards, OptimizerSchedule schedule, bool streamed,
                               int64_t grad_accum) {
  const int64_t staging = kImmediateStaging * shards.max_count();
  GradientFloats g;
  if (schedule == OptimizerSchedule::deferred)
    g.pool = shards.total() + (streamed && grad_accum > 1 ? staging : 0);
  else if (streamed)
    g.pool = staging;
  if (!streamed && (schedule == OptimizerSchedule::immediate || grad_accum > 1 || shards.ranks() > 1))
    g.backward = table.total();
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
