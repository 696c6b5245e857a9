#include "train/train_step.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "backend/cpu/resident_model.h"
#include "core/check.h"
#include "core/dtype.h"
#include "ops/mse_loss.h"
#include "registry/registry.h"
#include "runtime/arena.h"
#include "runtime/streamed_model.h"
#include "runtime/trace.h"
#include "train/adamw.h"

namespace ms {

TrainStep::TrainStep(const TrainOptions& opts, const RunSetup& setup, const TrainHooks& hooks, const ModelConfig& cfg,
                     const StepShapes& shapes, const ParamTable& table, const Shards& shards, HostState& host,
                     Communicator& comm, const BatchMaker& maker, NonFiniteMonitor& nonfinite)
    : opts_(opts),
      setup_(setup),
      hooks_(hooks),
      table_(table),
      shards_(shards),
      host_(host),
      comm_(comm),
      out_dim_(cfg.out_dim) {
  if (opts.runtime.offload == Offload::stream) {
    if (!opts.trace.empty()) trace_ = std::make_unique<Trace>();
    if (comm.size() > 1) collectives_ = connect_rank_devices(setup.backend, comm, opts.collective_timeout);
    backend_ = make_backend(setup.backend, opts.runtime.link_gbps, trace_.get());
    optimizer_stream_ = backend_->create_stream("optimizer", StreamKind::host);
    // The pools the link reads and writes: pinned in place where there is a link (a no-op on the CPU backend).
    backend_->pin_host(host_.weights.data(), host_.weights.size() * 2);
    if (host_.grads.size()) backend_->pin_host(host_.grads.data(), host_.grads.size() * 4);
    updated_.resize(table_.stages().size());
    StreamOptions so = stream_options(opts.runtime, comm.size());
    so.serialize = hooks.serialize;
    so.skip_compute = hooks.skip_compute;
    streamed_ = std::make_unique<StreamedModel>(cfg, shapes, *backend_, so, make_stage_runner(*backend_, cfg, shapes),
                                                comm.size() > 1 ? &comm : nullptr, collectives_.get());
  } else {
    resident_ = std::make_unique<ResidentModel<float>>(cfg, shapes, setup.keep_block_acts);
    params_ = AlignedBuffer<float>(size_t(table_.total()));
    resident_grads_ =
        AlignedBuffer<float>(size_t(gradient_floats(table_, shards, setup.schedule, false, opts.grad_accum).backward));
    if (comm.size() > 1) {
      gathered_ = AlignedBuffer<uint16_t>(size_t(table_.total()));
      shard_grads_ = AlignedBuffer<float>(size_t(shards.total()));
    }
  }
  auto probe = [&nonfinite](int64_t s, float* out, int64_t n) { nonfinite.probe(s, out, n); };
  if (resident_)
    resident_->set_probe(probe);
  else if (backend_->kind() == BackendKind::cpu)  // elsewhere the activations stay on the device
    streamed_->set_probe(probe);
  const int64_t n = shapes.most([&](const ModelDims& d) { return d.B * cfg.out_dim * d.F * d.H * d.W; });
  for (auto* v : {&pred_, &dpred_}) v->resize(size_t(n));
  for (Batch& b : batches_) {
    maker.allocate(b);
    if (backend_)  // what enqueue_inputs copies from
      for (auto* v : b.uploaded()) backend_->pin_host(v->data(), v->size() * sizeof(float));
  }
}

// Device work still in flight reads and writes the members declared after backend_, which are destroyed first.
TrainStep::~TrainStep() {
  if (!backend_) return;
  if (collectives_ && std::uncaught_exceptions() > 0) collectives_->abort();  // the peers' collectives will not come
  try {
    backend_->sync_all();
    for (Batch& b : batches_)
      for (auto* v : b.uploaded()) backend_->unpin_host(v->data());
  } catch (...) {  // the error that ended the run is already on its way out
  }
}

void TrainStep::enqueue_inputs(const Batch& b) {
  if (streamed_) streamed_->enqueue_inputs(b.dims, b.xt.data(), b.timesteps.data(), b.context.data(), b.target.data());
}

double TrainStep::step(const Batch& batch, const Update& u, const std::function<void()>& during, const Micro& micro) {
  stage_sumsq_.assign(table_.stages().size(), 0.0);
  if (setup_.schedule == OptimizerSchedule::immediate) {
    MS_CHECK(micro.count == 1, "the immediate schedule takes one micro-batch per step");
    return step_immediate(batch, u, during, micro);
  }
  return step_deferred(batch, u.step, during, micro);
}

double TrainStep::skip() {
  stage_sumsq_.assign(table_.stages().size(), 0.0);
  apply_pending();
  return std::numeric_limits<double>::quiet_NaN();
}

void TrainStep::defer(const Update& u) {
  pending_ = u;
  if (!streamed_) apply_pending();  // resident: update now; streamed: pipelined with the next forward
}

// Deferred schedule: loss and the host gradient pool for `batch`. Streamed, the pending update of the previous
// step runs on the optimizer stream, each stage's upload waiting only for its own, and each stage's norm
// contribution is summed there as its gradients land.
double TrainStep::step_deferred(const Batch& batch, int64_t t, const std::function<void()>& during,
                                const Micro& micro) {
  const bool first = micro.index == 0;
  if (streamed_) {
    std::vector<Event> ready(table_.stages().size());
    if (pending_.step > 0) {
      for (size_t s = 0; s < ready.size(); ++s) {
        backend_->launch(optimizer_stream_, "adamw", [this, s, u = pending_] { update_stage(s, host_grads(s), u); });
        ready[s] = backend_->record(optimizer_stream_);
      }
      pending_ = Update{};
    }
    // The first micro-batch's gradients land in the pool; a later one's in staging buffers, added on arrival.
    float* staging = host_.grads.data() + shards_.total();
    const int64_t stage = shards_.max_count();
    std::vector<Event> gathered(table_.stages().size() + 1);
    GradRoute route{
        [&](int j, int s) { return first ? host_grads(size_t(s)) : staging + (j % kImmediateStaging) * stage; },
        [&](int j) { return !first && j >= kImmediateStaging ? gathered[size_t(j - kImmediateStaging)] : Event{}; },
        [&](int j, int s, float* host, Event landed) {
          backend_->wait(optimizer_stream_, landed);
          backend_->launch(optimizer_stream_, micro.index + 1 == micro.count ? "norm" : "accumulate",
                           [=, this] { gather(size_t(s), host, t, micro); });
          gathered[size_t(j)] = backend_->record(optimizer_stream_);
        }};
    streamed_->enqueue_step(
        host_.weights.data(), route, [&](int s) { return ready[size_t(s)]; }, micro.rank_weight);
    during();
    return streamed_->finish();
  }
  // As streamed: the first micro-batch's gradients are computed in the pool, a later one's apart and added (several
  // ranks: every parameter's in the backward's pool, their sum's shard in the host pool or apart).
  const bool ranks = comm_.size() > 1;
  float* full = first && !ranks ? host_.grads.data() : resident_grads_.data();
  float* shard = first ? host_.grads.data() : shard_grads_.data();
  const double loss = resident_step(batch, full, shard, micro);
  const float* grads = ranks ? shard : full;
  for (size_t s = 0; s < stage_sumsq_.size(); ++s) gather(s, grads + shards_.stage(s).offset, t, micro);
  during();
  return loss;
}

void TrainStep::gather(size_t s, const float* grads, int64_t t, const Micro& micro) {
  float* pool = host_grads(s);
  const int64_t n = shards_.stage(s).count;
  if (grads != pool)
    for (int64_t i = 0; i < n; ++i) pool[i] += grads[i];
  if (micro.index + 1 < micro.count) return;
  if (micro.count > 1) {
    const float inv = 1.0f / float(micro.count);
    for (int64_t i = 0; i < n; ++i) pool[i] *= inv;
  }
  stage_sumsq_[s] = checked_sumsq(s, pool, t);
}

// Immediate schedule: every stage is updated (clipped by the previous step's norm) as soon as its gradients land,
// overlapped with the rest of the backward; streamed, gradients pass through kImmediateStaging stage-sized host
// buffers. A stage with non-finite gradients is skipped.
double TrainStep::step_immediate(const Batch& batch, const Update& u, const std::function<void()>& during,
                                 const Micro& micro) {
  if (!streamed_) {
    float* grads = comm_.size() > 1 ? shard_grads_.data() : resident_grads_.data();
    const double loss = resident_step(batch, resident_grads_.data(), grads, micro);
    for (size_t s = 0; s < stage_sumsq_.size(); ++s) immediate_update(s, grads + shards_.stage(s).offset, u);
    during();
    return loss;
  }
  const int64_t stage = shards_.max_count();
  std::vector<Event> consumed(table_.stages().size() + 1);
  GradRoute route{[&](int j, int) { return host_.grads.data() + (j % kImmediateStaging) * stage; },
                  [&](int j) { return j >= kImmediateStaging ? consumed[size_t(j - kImmediateStaging)] : Event{}; },
                  [&](int j, int s, float* host, Event landed) {
                    backend_->wait(optimizer_stream_, landed);
                    backend_->launch(optimizer_stream_, "adamw", [=, this] { immediate_update(size_t(s), host, u); });
                    consumed[size_t(j)] = updated_[size_t(s)] = backend_->record(optimizer_stream_);
                  }};
  std::vector<Event> ready = updated_;  // this step's uploads wait for the previous step's updates
  streamed_->enqueue_step(
      host_.weights.data(), route, [&](int s) { return ready[size_t(s)]; }, micro.rank_weight);
  during();
  return streamed_->finish();
}

// One stage of the immediate schedule: norm contribution, then the update unless non-finite.
void TrainStep::immediate_update(size_t s, float* grads, const Update& u) {
  stage_sumsq_[s] = checked_sumsq(s, grads, u.step);
  if (std::isfinite(stage_sumsq_[s])) update_stage(s, grads, u);
}

// Sum of squares of stage s's gradients (poisoned first when --inject-nan-grad names this step).
double TrainStep::checked_sumsq(size_t s, float* grads, int64_t t) {
  if (t == hooks_.inject_nan_grad && s == 0) grads[0] = std::numeric_limits<float>::quiet_NaN();
  return sum_squares(grads, shards_.stage(s).count);
}

double TrainStep::resident_step(const Batch& batch, float* full, float* shard, const Micro& micro) {
  const bool ranks = comm_.size() > 1;
  if (ranks) gather_stages(comm_, table_, shards_, host_.weights.data(), gathered_.data());
  convert_to_f32(DType::bf16, ranks ? gathered_.data() : host_.weights.data(), params_.data(), table_.total());
  std::fill(full, full + table_.total(), 0.0f);
  const ModelDims& d = batch.dims;
  resident_->set_dims(d);
  resident_->forward(params_.data(), batch.xt.data(), batch.timesteps.data(), batch.context.data(), pred_.data());
  const int64_t video = d.B * out_dim_ * d.F * d.H * d.W;
  const double loss = cpu::mse_loss<float>({.pred = pred_.data(),
                                            .target = batch.target.data(),
                                            .dpred = dpred_.data(),
                                            .n = video,
                                            .period = d.F * d.H * d.W,
                                            .skip = d.cond_frames * d.H * d.W});
  resident_->backward(params_.data(), dpred_.data(), full, nullptr, nullptr);
  if (ranks) reduce_stages(comm_, table_, shards_, full, shard, micro.rank_weight);
  return loss;
}

// AdamW on one stage's span of every pool, from that stage's gradients.
void TrainStep::update_stage(size_t s, const float* grads, const Update& u) {
  const StageShard& sh = shards_.stage(s);
  adamw_update(opts_.adamw, opts_.lr_at(u.step), u.step, u.scale, grads, host_.master.data() + sh.offset,
               host_.exp_avg.data() + sh.offset, host_.exp_avg_sq.data() + sh.offset, host_.weights.data() + sh.offset,
               sh.count);
}

void TrainStep::apply_pending() {
  if (pending_.step == 0) return;
  for (size_t s = 0; s < table_.stages().size(); ++s) update_stage(s, host_grads(s), pending_);
  pending_ = Update{};
}

int64_t TrainStep::device_peak_bytes() const {
  return streamed_ ? streamed_->arena_bytes() : int64_t(params_.size() * sizeof(float)) + resident_->workspace_bytes();
}

int64_t TrainStep::uploaded_weight_bytes() const { return streamed_ ? streamed_->uploaded_weights() * 2 : 0; }

int64_t TrainStep::device_budget_bytes() const { return streamed_ ? streamed_->device_budget() : 0; }

BackendKind TrainStep::backend_kind() const { return backend_ ? backend_->kind() : BackendKind::cpu; }

}  // namespace ms
