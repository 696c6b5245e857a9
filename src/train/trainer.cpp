#include "train/trainer.h"

#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/cpu/resident_model.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "model/loader.h"
#include "ops/mse_loss.h"
#include "registry/registry.h"
#include "runtime/host_state.h"
#include "runtime/streamed_model.h"
#include "runtime/trace.h"
#include "sample/train_samples.h"
#include "train/batch.h"
#include "train/checkpoint.h"
#include "train/nonfinite.h"
#include "train/option_table.h"
#include "train/progress.h"
#include "train/run_directory.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

constexpr int kStaging = 2;  // immediate schedule: stage-sized host gradient buffers

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

// Installs the SIGINT handler for the life of a run and restores the previous one after.
struct SigintGuard {
  struct sigaction old {};
  SigintGuard() {
    g_interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
  }
  ~SigintGuard() { sigaction(SIGINT, &old, nullptr); }
};

class Run {
 public:
  // opts: with the clip size and batch size resolved by open_training_data.
  Run(const TrainOptions& opts, const TrainHooks& hooks, const ModelConfig& cfg, std::unique_ptr<Dataset> data)
      : opts_(opts),
        hooks_(hooks),
        cfg_(cfg),
        table_(cfg),
        host_(table_, opts.optimizer_schedule == OptimizerSchedule::immediate
                          ? (opts.offload == Offload::stream ? kStaging * table_.max_stage_numel() : 0)
                          : table_.total()),
        dims_(ModelDims::make(cfg, opts.batch_size, opts.frames, opts.height, opts.width, cfg.text_len)),
        data_(std::move(data)),
        batch_maker_(cfg, dims_, *data_, opts.flow, hooks),
        nonfinite_(cfg, dims_, hooks.inject_nan_activation) {
    const std::string backend = resolve_backend(opts, hooks, cfg);  // cpu for --offload none
    if (opts.offload == Offload::stream) {
      if (!opts.trace.empty()) trace_ = std::make_unique<Trace>();
      backend_ = make_backend(backend, opts.link_gbps, trace_.get());
      optimizer_stream_ = backend_->create_stream("optimizer", StreamKind::host);
      // The pools the link reads and writes: pinned in place where there is a link (a no-op on the CPU backend).
      backend_->pin_host(host_.weights.data(), host_.weights.size() * 2);
      if (host_.grads.size()) backend_->pin_host(host_.grads.data(), host_.grads.size() * 4);
      updated_.resize(table_.stages().size());
      streamed_ = std::make_unique<StreamedModel>(cfg, dims_, *backend_,
                                                  StreamOptions{opts.prefetch, opts.device_memory, hooks.serialize,
                                                                hooks.skip_compute, opts.offload_activations},
                                                  make_stage_runner(*backend_, cfg, dims_));
    } else {
      resident_ = std::make_unique<ResidentModel<float>>(cfg, dims_);
      params_ = AlignedBuffer<float>(size_t(table_.total()));
      if (opts.optimizer_schedule == OptimizerSchedule::immediate)
        resident_grads_ = AlignedBuffer<float>(size_t(table_.total()));
    }
    auto probe = [this](int64_t s, float* out, int64_t n) { nonfinite_.probe(s, out, n); };
    if (!streamed_)
      resident_->set_probe(probe);
    else if (std::string(backend_->name()) == "cpu")  // elsewhere the activations stay on the device
      streamed_->set_probe(probe);
    if (cfg.out_dim != cfg.in_dim)  // the flow target lives in the input space
      MS_FAIL("the model's out_dim ", cfg.out_dim, " differs from its in_dim ", cfg.in_dim,
              "; rectified-flow training needs them equal");
    const int64_t n = dims_.B * cfg.in_dim * dims_.F * dims_.H * dims_.W;
    for (auto* v : {&pred_, &dpred_}) v->resize(size_t(n));
    for (Batch& b : batches_) {
      batch_maker_.allocate(b);
      if (backend_)  // what enqueue_inputs copies from
        for (auto* v : b.uploaded()) backend_->pin_host(v->data(), v->size() * sizeof(float));
    }
  }

  // Device work still in flight (an exception left a step midway) reads and writes the members declared
  // after backend_, which are destroyed first: wait for it before anything goes.
  ~Run() {
    if (!backend_) return;
    try {
      backend_->sync_all();
      for (Batch& b : batches_)
        for (auto* v : b.uploaded()) backend_->unpin_host(v->data());
    } catch (...) {  // the error that ended the run is already on its way out
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  HostState& host() { return host_; }
  const ParamTable& table() const { return table_; }

  TrainSummary run(TrainerState state) {
    RunDirectory dir(opts_.out, state.step);
    dir.write_summary({{"param_count", table_.total()},
                       {"weights_bytes", table_.total() * 2},
                       {"host_state_bytes", host_.bytes()},
                       {"device_budget_bytes", opts_.device_memory},
                       {"device_arena_bytes", device_peak_bytes()},
                       {"h2d_weight_bytes_per_step", streamed_ ? streamed_->uploaded_weights() * 2 : 0},
                       {"prefetch", opts_.prefetch},
                       {"offload", name_of(opts_.offload)},
                       {"backend", backend_ ? backend_->name() : "cpu"}});
    log_info("model: ", table_.total(), " parameters, ", cfg_.num_layers, " blocks, dim ", cfg_.dim, "; ", dims_.N(),
             " tokens per step (", dims_.B, " x ", dims_.L, "); host state ", host_.bytes() >> 20, " MiB; ",
             num_threads(), " threads; backend ", backend_ ? backend_->name() : "cpu");
    if (const std::string w = attention_export_warning(cfg_, opts_.save_format); !w.empty())
      log_warn("--save-format ", opts_.save_format, ": ", w);
    Rng rng(state.rng_state);
    Progress progress(state.step, opts_.steps, opts_.log_every);
    TrainSummary sum;
    std::vector<double> losses;
    const auto t_run = std::chrono::steady_clock::now();
    SigintGuard sigint;
    int64_t saved_step = state.step;   // the run starts from a saved state (or from scratch)
    const Batch* prepared = nullptr;   // the next step's batch, when made during the previous step's device work
    std::exception_ptr prepare_error;  // what making it threw: raised once the step it overlapped has finished
    while (state.step < opts_.steps && !g_interrupted) {
      if (prepare_error) std::rethrow_exception(prepare_error);
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t t = state.step + 1;
      Batch& batch = batches_[size_t(t % 2)];
      if (prepared != &batch) prepare(batch, state.data_position, rng);
      prepared = nullptr;
      std::string fault = nonfinite_.check_batch(batch.x0.data(), batch.context.data(), state.data_position);
      state.data_position += dims_.B;
      const uint64_t rng_after = rng.state();  // where a checkpoint of step t resumes
      // Makes step t+1's batch while step t computes; streamed, its inputs upload during the backward.
      auto prepare_next = [&] {
        if (t >= opts_.steps || g_interrupted) return;
        try {
          prepare(batches_[size_t((t + 1) % 2)], state.data_position, rng);
          prepared = &batches_[size_t((t + 1) % 2)];
        } catch (...) {
          prepare_error = std::current_exception();
        }
      };
      const bool immediate = opts_.optimizer_schedule == OptimizerSchedule::immediate;
      stage_sumsq_.assign(table_.stages().size(), 0.0);
      nonfinite_.start_step(t);
      const double loss = !fault.empty() ? skip_forward()
                          : immediate    ? step_immediate(batch, Update{t, state.clip_scale}, prepare_next)
                                         : step_deferred(batch, t, prepare_next);
      double sumsq = 0;  // per stage, in stage order: the same sum in every schedule
      for (double x : stage_sumsq_) sumsq += x;
      const double norm = std::sqrt(sumsq);
      const bool finite = fault.empty() && std::isfinite(loss) && std::isfinite(norm);
      const float scale = opts_.grad_clip > 0 && norm > opts_.grad_clip ? float(opts_.grad_clip / norm) : 1.0f;
      if (finite && immediate) state.clip_scale = scale;  // clips the next step
      if (finite && !immediate) {
        pending_ = Update{t, scale};
        if (!streamed_) apply_pending();  // resident: update now; streamed: pipelined with the next forward
      }
      if (!finite) {
        ++sum.skipped;
        const bool before_forward = !fault.empty();
        if (fault.empty()) fault = nonfinite_.locate(loss, norm, stage_sumsq_);
        if (opts_.on_nonfinite == NonFinitePolicy::stop)
          MS_FAIL("step ", t, ": ", fault, "; stopped (--on-nonfinite stop) without saving this step. ",
                  saved_step > 0 ? cat("The last checkpoint is ", opts_.out, "/latest (step ", saved_step, ")")
                                 : std::string("No checkpoint was saved"),
                  ". Find the cause (the data, a lower --lr or --grad-clip) or run with --on-nonfinite skip");
        log_warn("step ", t, ": ", fault, "; ",
                 before_forward ? "the step was skipped before the forward"
                 : immediate    ? "the stages with non-finite gradients were skipped"
                                : "the update was skipped",
                 ", their parameters untouched");
      }
      state.step = t;
      state.rng_state = rng_after;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double tps = double(dims_.N()) / secs;
      dir.append_metrics({{"step", t},
                          {"loss", loss},
                          {"lr", opts_.lr_at(t)},
                          {"grad_norm", norm},
                          {"seconds", secs},
                          {"tokens_per_second", tps},
                          {"device_peak_bytes", device_peak_bytes()},
                          {"skipped", !finite}});
      ++sum.steps_run;
      if (std::isfinite(loss)) losses.push_back(loss);
      progress.update(t, loss, tps);
      if ((opts_.save_every > 0 && t % opts_.save_every == 0) || t == opts_.steps) {
        apply_pending();
        save_checkpoint(opts_.out, cfg_, table_, host_, state, options_to_json(opts_), opts_.save_format);
        saved_step = t;
      }
      if (sample_due(opts_.samples, t)) {
        apply_pending();
        write_train_samples(opts_.samples, opts_.out, cfg_, host_.weights.data(), t,
                            {cfg_.in_dim, dims_.F, dims_.H, dims_.W}, opts_.seed);
      }
    }
    progress.finish();
    if (g_interrupted) {
      sum.interrupted = true;
      apply_pending();
      if (state.step > 0 && saved_step != state.step)
        save_checkpoint(opts_.out, cfg_, table_, host_, state, options_to_json(opts_), opts_.save_format);
      log_warn("interrupted after step ", state.step, "; checkpoint saved; continue with --resume ", opts_.out);
    }
    if (trace_) {
      trace_->write(opts_.trace);
      log_info("trace: ", trace_->size(), " events in ", opts_.trace, " (open in Perfetto or chrome://tracing)");
    }
    if (!losses.empty()) {
      const size_t k = std::max<size_t>(1, losses.size() / 10);
      for (size_t i = 0; i < k; ++i) {
        sum.first_loss += losses[i] / double(k);
        sum.last_loss += losses[losses.size() - 1 - i] / double(k);
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count();
      sum.tokens_per_second = double(dims_.N()) * double(losses.size()) / secs;
      log_info("done: ", state.step, " steps; loss ", sum.first_loss, " -> ", sum.last_loss, " (first/last 10% mean); ",
               int64_t(sum.tokens_per_second), " tokens/s; checkpoint ", opts_.out, "/latest");
    }
    return sum;
  }

 private:
  struct Update {
    int64_t step = 0;  // 1-based optimizer step; 0: nothing pending
    float scale = 1;   // gradient clipping factor
  };

  // A step whose batch is not finite computes nothing; the previous step's pending update still lands.
  double skip_forward() {
    apply_pending();
    return std::numeric_limits<double>::quiet_NaN();
  }

  // Makes the batch of data samples [position, position + B) and, streamed, enqueues its upload.
  void prepare(Batch& batch, int64_t position, Rng& rng) {
    batch_maker_.make(batch, position, rng);
    if (streamed_)
      streamed_->enqueue_inputs(batch.xt.data(), batch.timesteps.data(), batch.context.data(), batch.target.data());
  }

  // Deferred schedule: loss and the host gradient pool for `batch`. Streamed, the pending update of the
  // previous step runs on the optimizer stream, each stage's upload waiting only for its own, and each
  // stage's norm contribution is summed there as its gradients land. `during` runs while the device works.
  double step_deferred(const Batch& batch, int64_t t, const std::function<void()>& during) {
    if (streamed_) {
      std::vector<Event> ready(table_.stages().size());
      if (pending_.step > 0) {
        for (size_t s = 0; s < ready.size(); ++s) {
          backend_->launch(optimizer_stream_, "adamw", [this, s, u = pending_] { update_stage(s, host_grads(s), u); });
          ready[s] = backend_->record(optimizer_stream_);
        }
        pending_ = Update{};
      }
      GradRoute route{[&](int, int s) { return host_grads(size_t(s)); }, [](int) { return Event{}; },
                      [&](int, int s, float* host, Event landed) {
                        backend_->wait(optimizer_stream_, landed);
                        backend_->launch(optimizer_stream_, "norm",
                                         [=, this] { stage_sumsq_[size_t(s)] = checked_sumsq(size_t(s), host, t); });
                      }};
      streamed_->enqueue_step(host_.weights.data(), route, [&](int s) { return ready[size_t(s)]; });
      during();
      return streamed_->finish();
    }
    host_.grads.zero();
    const double loss = resident_step(batch, host_.grads.data());
    for (size_t s = 0; s < stage_sumsq_.size(); ++s) stage_sumsq_[s] = checked_sumsq(s, host_grads(s), t);
    during();
    return loss;
  }

  // Immediate schedule: every stage is updated (clipped by the previous step's norm) as soon as its
  // gradients land, overlapped with the rest of the backward; gradients pass through kStaging
  // stage-sized host buffers. A stage with non-finite gradients is skipped.
  double step_immediate(const Batch& batch, const Update& u, const std::function<void()>& during) {
    if (!streamed_) {
      resident_grads_.zero();
      const double loss = resident_step(batch, resident_grads_.data());
      for (size_t s = 0; s < stage_sumsq_.size(); ++s)
        immediate_update(s, resident_grads_.data() + table_.stages()[s].offset, u);
      during();
      return loss;
    }
    const int64_t stage = table_.max_stage_numel();
    std::vector<Event> consumed(table_.stages().size() + 1);
    GradRoute route{[&](int j, int) { return host_.grads.data() + (j % kStaging) * stage; },
                    [&](int j) { return j >= kStaging ? consumed[size_t(j - kStaging)] : Event{}; },
                    [&](int j, int s, float* host, Event landed) {
                      backend_->wait(optimizer_stream_, landed);
                      backend_->launch(optimizer_stream_, "adamw", [=, this] { immediate_update(size_t(s), host, u); });
                      consumed[size_t(j)] = updated_[size_t(s)] = backend_->record(optimizer_stream_);
                    }};
    std::vector<Event> ready = updated_;  // this step's uploads wait for the previous step's updates
    streamed_->enqueue_step(host_.weights.data(), route, [&](int s) { return ready[size_t(s)]; });
    during();
    return streamed_->finish();
  }

  // One stage of the immediate schedule: norm contribution, then the update unless non-finite.
  void immediate_update(size_t s, float* grads, const Update& u) {
    stage_sumsq_[s] = checked_sumsq(s, grads, u.step);
    if (std::isfinite(stage_sumsq_[s])) update_stage(s, grads, u);
  }

  // Sum of squares of stage s's gradients (poisoned first when --inject-nan-grad names this step).
  double checked_sumsq(size_t s, float* grads, int64_t t) {
    if (t == hooks_.inject_nan_grad && s == 0) grads[0] = std::numeric_limits<float>::quiet_NaN();
    return sum_squares(grads, table_.stages()[s].numel);
  }

  // Resident forward, loss and backward with the bf16 working weights; grads [P] must be zero.
  double resident_step(const Batch& batch, float* grads) {
    convert_to_f32(DType::bf16, host_.weights.data(), params_.data(), table_.total());
    resident_->forward(params_.data(), batch.xt.data(), batch.timesteps.data(), batch.context.data(), pred_.data());
    const double loss = cpu::mse_loss(pred_.data(), batch.target.data(), dpred_.data(), int64_t(pred_.size()));
    resident_->backward(params_.data(), dpred_.data(), grads, nullptr, nullptr);
    return loss;
  }

  float* host_grads(size_t s) { return host_.grads.data() + table_.stages()[s].offset; }

  // AdamW on one stage's span of every pool, from that stage's gradients.
  void update_stage(size_t s, const float* grads, const Update& u) {
    const StageInfo& st = table_.stages()[s];
    adamw_update(opts_.adamw, opts_.lr_at(u.step), u.step, u.scale, grads, host_.master.data() + st.offset,
                 host_.exp_avg.data() + st.offset, host_.exp_avg_sq.data() + st.offset,
                 host_.weights.data() + st.offset, st.numel);
  }

  // Applies the pending update to every stage now (before a checkpoint, and in the resident schedule).
  void apply_pending() {
    if (pending_.step == 0) return;
    for (size_t s = 0; s < table_.stages().size(); ++s) update_stage(s, host_grads(s), pending_);
    pending_ = Update{};
  }

  // What the device side holds during a step: the streamed arena, or all f32 weights and the workspace.
  int64_t device_peak_bytes() const {
    return streamed_ ? streamed_->arena_bytes()
                     : int64_t(params_.size() * sizeof(float)) + resident_->workspace_bytes();
  }

  TrainOptions opts_;
  TrainHooks hooks_;
  ModelConfig cfg_;
  ParamTable table_;
  HostState host_;
  ModelDims dims_;
  std::unique_ptr<Dataset> data_;
  BatchMaker batch_maker_;
  NonFiniteMonitor nonfinite_;
  std::unique_ptr<ResidentModel<float>> resident_;  // --offload none
  AlignedBuffer<float> params_;                     // [P] resident: f32 copy of the working weights
  AlignedBuffer<float> resident_grads_;             // [P] resident, immediate: the backward's gradients
  std::unique_ptr<Trace> trace_;
  std::unique_ptr<Backend> backend_;  // --offload stream
  int optimizer_stream_ = -1;
  std::unique_ptr<StreamedModel> streamed_;
  Update pending_;                   // deferred: the update waiting for the next step
  std::vector<Event> updated_;       // immediate, streamed: each stage's last update
  std::vector<double> stage_sumsq_;  // this step's per-stage sums of squared gradients
  Batch batches_[2];                 // step t uses batches_[t % 2]; the other is made meanwhile
  std::vector<float> pred_, dpred_;  // [B, C, F, H, W]
};

}  // namespace

TrainSummary train(const TrainOptions& opts, const TrainHooks& hooks) {
  opts.validate();
  const fs::path out(opts.out);
  if (fs::exists(out / "latest"))
    MS_FAIL("run directory '", opts.out, "' already holds a run; continue it with --resume ", opts.out,
            " or choose another --out");
  ModelSource src = resolve_model(opts.model, opts.config);
  TrainOptions resolved = opts;
  resolved.make_paths_absolute();
  std::unique_ptr<Dataset> data = open_training_data(resolved, src.config);
  Run run(resolved, hooks, src.config, std::move(data));
  std::vector<float> init(size_t(run.table().total()));
  load_params(src, run.table(), opts.seed, init.data());
  run.host().set_master(init.data());
  TrainerState state;
  state.rng_state = opts.seed * 0x9e3779b97f4a7c15ull + 1;
  return run.run(state);
}

TrainSummary resume(const std::string& run_dir, int64_t steps, const TrainHooks& hooks) {
  CheckpointInfo info = read_checkpoint_info(run_dir);
  TrainOptions opts = options_from_json(info.options);
  opts.out = run_dir;
  if (steps > 0) opts.steps = steps;
  opts.validate();
  log_info("resuming ", run_dir, " from ", info.dir, " at step ", info.state.step, " of ", opts.steps);
  std::unique_ptr<Dataset> data = open_training_data(opts, info.config);
  Run run(opts, hooks, info.config, std::move(data));
  load_optimizer_state(info.dir, run.table(), run.host());
  return run.run(info.state);
}

}  // namespace ms
