#include "train/trainer.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/parallel.h"
#include "core/units.h"
#include "data/dataset.h"
#include "model/loader.h"
#include "runtime/trace.h"
#include "sample/train_samples.h"
#include "train/batch.h"
#include "train/checkpoint.h"
#include "train/memory_fit.h"
#include "train/nonfinite.h"
#include "train/option_table.h"
#include "train/progress.h"
#include "train/run_directory.h"
#include "train/step_schedule.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// --verbose: the resident set at each point of start-up (docs/runtime.md: "Host memory").
void log_resident(const char* after) {
  log_debug("resident set after ", after, ": ", format_bytes(double(resident_bytes())));
}

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

// opts with --optimizer-schedule resolved, once the run is known to fit in host memory (fit_host_memory).
TrainOptions fitted(TrainOptions opts, const TrainHooks& hooks, const ModelConfig& cfg, const Dataset& data,
                    bool resumed) {
  fit_host_memory(opts, cfg, step_shapes(data, cfg), resolve_backend(opts, hooks, cfg), resumed);
  return opts;
}

class Run {
 public:
  // opts: with the clip size and batch size resolved by open_training_data. Checks that the run fits in host memory
  // before it allocates anything large.
  Run(const TrainOptions& opts, const TrainHooks& hooks, const ModelConfig& cfg, std::unique_ptr<Dataset> data,
      bool resumed)
      : opts_(fitted(opts, hooks, cfg, *data, resumed)),
        hooks_(hooks),
        cfg_(checked_for_flow(cfg)),
        table_(cfg),
        host_(table_,
              gradient_floats(table_, opts_.schedule(), opts_.offload == Offload::stream, opts_.grad_accum).pool),
        shapes_(step_shapes(*data, cfg)),
        sample_shape_(largest_shape(*data)),
        data_(std::move(data)),
        text_encoder_(load_text_encoder(opts_, *data_, cfg_)),
        batch_maker_(cfg, shapes_, *data_, opts.flow, caption_dropout(opts, *data_, cfg), hooks, text_encoder_.get()),
        nonfinite_(cfg, hooks.inject_nan_activation),
        schedule_(opts_, hooks_, cfg, shapes_, table_, host_, batch_maker_, nonfinite_),
        sample_vae_(load_sample_vae(opts_.samples, cfg_)) {}

  HostState& host() { return host_; }
  const ParamTable& table() const { return table_; }

  TrainSummary run(TrainerState state) {
    state.sample_shape = {sample_shape_.frames, sample_shape_.height, sample_shape_.width};
    RunDirectory dir(opts_.out, state.step);
    dir.write_summary({{"param_count", table_.total()},
                       {"weights_bytes", table_.total() * 2},
                       {"host_state_bytes", host_.bytes()},
                       {"device_budget_bytes", schedule_.device_budget_bytes()},
                       {"device_arena_bytes", schedule_.device_peak_bytes()},
                       {"h2d_weight_bytes_per_step", schedule_.uploaded_weight_bytes()},
                       {"prefetch", opts_.prefetch},
                       {"offload", name_of(opts_.offload)},
                       {"backend", name_of(schedule_.backend_kind())}});
    if (const std::string w = attention_export_warning(cfg_, opts_.save_format); !w.empty())
      log_warn("--save-format ", opts_.save_format, ": ", w);
    const int64_t epoch = data_->epoch_size();
    if (opts_.save_every_epochs > 0 && epoch == 0)
      MS_FAIL("--save-every-epochs needs data with epochs (a dataset TOML); --data ", opts_.data,
              " is generated without end. Use --save-every");
    Rng rng(state.rng_state);
    Progress progress(state.step, opts_.steps, opts_.log_every);
    TrainSummary sum;
    sum.recomputed = !opts_.keep_block_acts;
    std::vector<double> losses;
    int64_t tokens = 0;  // of the steps run
    const auto t_run = std::chrono::steady_clock::now();
    SigintGuard sigint;
    int64_t saved_step = state.step;   // the run starts from a saved state (or from scratch)
    const Batch* prepared = nullptr;   // the next step's batch, when made during the previous step's device work
    std::exception_ptr prepare_error;  // what making it threw: raised once the step it overlapped has finished
    while (state.step < opts_.steps && !g_interrupted) {
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t t = state.step + 1, n = opts_.grad_accum;
      const bool immediate = opts_.schedule() == OptimizerSchedule::immediate;
      nonfinite_.start_step(t);
      std::string fault;  // the first non-finite batch of the step: the step is skipped
      double loss_sum = 0;
      uint64_t rng_after = 0;  // where a checkpoint of step t resumes
      int64_t step_tokens = 0;
      nlohmann::json shapes = nlohmann::json::array();
      for (int64_t k = 0; k < n; ++k) {  // the step's micro-batches (--grad-accum)
        if (prepare_error) std::rethrow_exception(prepare_error);
        const int64_t m = (t - 1) * n + k;
        Batch& batch = schedule_.batch(m);
        if (prepared != &batch) prepare(batch, state.data_position, rng);
        prepared = nullptr;
        const ModelDims d = batch.dims;
        if (fault.empty())
          fault = nonfinite_.check_batch(d, batch.x0.data(), batch.context.data(), state.data_position);
        state.data_position += d.B;
        step_tokens += d.N();
        shapes.push_back({d.F, d.H, d.W});
        const bool last = k + 1 == n;
        if (last) rng_after = rng.state();
        // Makes the next batch while this one computes; streamed, its inputs upload during the backward.
        auto prepare_next = [&] {
          if ((last && t >= opts_.steps) || g_interrupted) return;
          try {
            prepare(schedule_.batch(m + 1), state.data_position, rng);
            prepared = &schedule_.batch(m + 1);
          } catch (...) {
            prepare_error = std::current_exception();
          }
        };
        if (fault.empty())
          loss_sum += schedule_.step(batch, Update{t, state.clip_scale}, prepare_next, Micro{k, n});
        else if (!last)  // the step is skipped; its batches are still drawn, as an unskipped step draws them
          prepare_next();
      }
      const double loss = fault.empty() ? loss_sum / double(n) : schedule_.skip();
      double sumsq = 0;  // per stage, in stage order: the same sum in every schedule
      for (double x : schedule_.stage_sumsq()) sumsq += x;
      const double norm = std::sqrt(sumsq);
      const bool finite = fault.empty() && std::isfinite(loss) && std::isfinite(norm);
      const float scale = opts_.grad_clip > 0 && norm > opts_.grad_clip ? float(opts_.grad_clip / norm) : 1.0f;
      if (finite && immediate) state.clip_scale = scale;  // clips the next step
      if (finite && !immediate) schedule_.defer(Update{t, scale});
      if (!finite) {
        ++sum.skipped;
        const bool before_forward = !fault.empty();
        if (fault.empty()) fault = nonfinite_.locate(loss, norm, schedule_.stage_sumsq());
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
      const double tps = double(step_tokens) / secs;
      tokens += step_tokens;
      dir.append_metrics({{"step", t},
                          {"loss", loss},
                          {"lr", opts_.lr_at(t)},
                          {"grad_norm", norm},
                          {"seconds", secs},
                          {"tokens_per_second", tps},
                          {"device_peak_bytes", schedule_.device_peak_bytes()},
                          {"skipped", !finite},
                          {"shape", n == 1 ? shapes[0] : shapes},
                          {"tokens", step_tokens}});
      ++sum.steps_run;
      if (std::isfinite(loss)) losses.push_back(loss);
      progress.update(t, loss, tps);
      if (sum.steps_run == 1) log_resident("the first step");
      const bool epoch_end = epoch > 0 && state.data_position % epoch == 0 && opts_.save_every_epochs > 0 &&
                             (state.data_position / epoch) % opts_.save_every_epochs == 0;
      if ((opts_.save_every > 0 && t % opts_.save_every == 0) || t == opts_.steps || epoch_end) {
        schedule_.apply_pending();
        save(state);
        saved_step = t;
      }
      if (sample_due(opts_.samples, t)) {
        schedule_.apply_pending();
        write_train_samples(opts_.samples, opts_.out, cfg_, host_.weights.data(), t, sample_shape_, opts_.seed,
                            sample_vae_.get(), text_encoder_.get());
      }
    }
    progress.finish();
    if (g_interrupted) {
      sum.interrupted = true;
      schedule_.apply_pending();
      if (state.step > 0 && saved_step != state.step) save(state);
      log_warn("interrupted after step ", state.step, "; checkpoint saved; continue with --resume ", opts_.out);
    }
    if (Trace* trace = schedule_.trace()) {
      trace->write(opts_.trace);
      log_info("trace: ", trace->size(), " events in ", opts_.trace, " (open in Perfetto or chrome://tracing)");
    }
    if (!losses.empty()) {
      const size_t k = std::max<size_t>(1, losses.size() / 10);
      for (size_t i = 0; i < k; ++i) {
        sum.first_loss += losses[i] / double(k);
        sum.last_loss += losses[losses.size() - 1 - i] / double(k);
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count();
      sum.tokens_per_second = double(tokens) / secs;
      log_info("done: ", state.step, " steps; loss ", sum.first_loss, " -> ", sum.last_loss, " (first/last 10% mean); ",
               int64_t(sum.tokens_per_second), " tokens/s; checkpoint ", opts_.out, "/latest");
    }
    return sum;
  }

 private:
  // The rectified-flow target lives in the input space.
  static const ModelConfig& checked_for_flow(const ModelConfig& c) {
    if (c.out_dim != c.in_dim)
      MS_FAIL("the model's out_dim ", c.out_dim, " differs from its in_dim ", c.in_dim,
              "; rectified-flow training needs them equal");
    return c;
  }

  // Checkpoints the run (the pending update applied) and, with --keep-last, removes the oldest beyond it.
  void save(const TrainerState& state) {
    save_checkpoint(opts_.out, cfg_, table_, host_, state, options_to_json(opts_), opts_.save_format);
    if (opts_.keep_last > 0) prune_checkpoints(opts_.out, opts_.keep_last);
  }

  // Makes the batch that starts at data position `position` and, streamed, enqueues its upload.
  void prepare(Batch& batch, int64_t position, Rng& rng) {
    batch_maker_.make(batch, position, rng);
    schedule_.enqueue_inputs(batch);
  }

  TrainOptions opts_;
  TrainHooks hooks_;
  ModelConfig cfg_;
  ParamTable table_;
  HostState host_;
  StepShapes shapes_;       // the data's buckets at their largest batches
  DataShape sample_shape_;  // the largest bucket's clip shape: what samples are drawn at
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<TextEncoder> text_encoder_;  // --t5: captions and sample prompts; null: the built-in hash
  BatchMaker batch_maker_;
  NonFiniteMonitor nonfinite_;
  StepSchedule schedule_;
  std::unique_ptr<VaeWeights> sample_vae_;  // decodes latent samples (--vae); null: none
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
  Run run(resolved, hooks, src.config, std::move(data), false);
  log_resident("allocating the pools");
  load_params(src, run.table(), opts.seed, run.host().master.data());
  run.host().refresh_weights();
  log_resident("loading the model");
  TrainerState state;
  state.rng_state = opts.seed * 0x9e3779b97f4a7c15ull + 1;
  return run.run(state);
}

TrainSummary resume(const std::string& run_dir, int64_t steps, const TrainHooks& hooks, int64_t host_memory) {
  CheckpointInfo info = read_checkpoint_info(run_dir);
  TrainOptions opts = options_from_json(info.options);
  opts.out = run_dir;
  opts.host_memory = host_memory;
  if (steps > 0) opts.steps = steps;
  opts.validate();
  log_info("resuming ", run_dir, " from ", info.dir, " at step ", info.state.step, " of ", opts.steps);
  std::unique_ptr<Dataset> data = open_training_data(opts, info.config);
  Run run(opts, hooks, info.config, std::move(data), true);
  log_resident("allocating the pools");
  load_optimizer_state(info.dir, run.table(), run.host());
  log_resident("loading the checkpoint");
  return run.run(info.state);
}

}  // namespace ms
