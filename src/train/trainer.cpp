#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

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
#include "train/interrupt.h"
#include "train/memory_fit.h"
#include "train/nonfinite.h"
#include "train/option_table.h"
#include "train/progress.h"
#include "train/run_directory.h"
#include "train/run_setup.h"
#include "train/train_step.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// --verbose: the resident set at each point of start-up (docs/runtime.md: "Host memory").
void log_resident(const char* after) {
  log_debug("resident set after ", after, ": ", format_bytes(double(resident_bytes())));
}

SingleProcess g_single;

class Run {
 public:
  // opts: with the clip size and batch size resolved by open_training_data. Checks that the run fits in host memory
  // before it allocates anything large.
  Run(const TrainOptions& opts, const TrainHooks& hooks, const ModelConfig& cfg, std::unique_ptr<Dataset> data,
      bool resumed, Communicator& comm)
      : comm_(comm),
        opts_(opts),
        shapes_(step_shapes(*data, cfg, comm.size(), i2v_steps(opts, cfg))),
        setup_(resolve_run(opts, hooks, cfg, shapes_, resumed, comm)),
        hooks_(hooks),
        cfg_(checked_for_flow(cfg)),
        table_(cfg),
        shards_(table_, comm.rank(), comm.size()),
        host_(shards_.total(), gradient_floats(table_, shards_, setup_.schedule,
                                               opts_.runtime.offload == Offload::stream, opts_.grad_accum)
                                   .pool),
        sample_shape_(largest_shape(*data)),
        data_(std::move(data)),
        text_encoder_(load_text_encoder(opts_, *data_, cfg_)),
        batch_maker_(cfg, shapes_, *data_, opts.flow, caption_dropout(opts, *data_, cfg), hooks, text_encoder_.get(),
                     opts.i2v_ratio),
        nonfinite_(cfg, hooks.inject_nan_activation),
        step_(opts_, setup_, hooks_, cfg, shapes_, table_, shards_, host_, comm_, batch_maker_, nonfinite_),
        sample_vae_(load_sample_vae(opts_.samples, cfg_)) {}

  HostState& host() { return host_; }
  const ParamTable& table() const { return table_; }
  const Shards& shards() const { return shards_; }

  // The master weights of the model src names (or initialised from seed): this rank's shards of them.
  void load_model(const ModelSource& src, uint64_t seed) {
    std::vector<ParamSpan> spans;
    for (size_t s = 0; s < table_.stages().size(); ++s) {
      const StageShard& sh = shards_.stage(s);
      const int64_t at = table_.stages()[s].offset + sh.begin;
      if (sh.count) spans.push_back({at, at + sh.count, host_.master.data() + sh.offset});
    }
    load_params(src, table_, seed, spans);
    host_.refresh_weights();
  }

  TrainSummary run(TrainerState state) {
    state.sample_shape = {sample_shape_.frames, sample_shape_.height, sample_shape_.width};
    state.ranks = comm_.size();
    const bool lead = comm_.rank() == 0;  // writes the run directory's files and reports progress
    std::optional<RunDirectory> dir;
    if (lead) dir.emplace(opts_.out, state.step);
    comm_.barrier(Channel::control);  // the run directory exists for every rank
    if (lead)
      dir->write_summary({{"param_count", table_.total()},
                          {"weights_bytes", table_.total() * 2},
                          {"host_state_bytes", host_.bytes()},
                          {"device_budget_bytes", step_.device_budget_bytes()},
                          {"device_arena_bytes", step_.device_peak_bytes()},
                          {"h2d_weight_bytes_per_step", step_.uploaded_weight_bytes()},
                          {"prefetch", opts_.runtime.prefetch},
                          {"offload", name_of(opts_.runtime.offload)},
                          {"backend", name_of(step_.backend_kind())},
                          {"ranks", comm_.size()}});
    if (const std::string w = attention_export_warning(cfg_, opts_.save_format); !w.empty())
      log_warn("--save-format ", opts_.save_format, ": ", w);
    const int64_t epoch = data_->epoch_size();
    if (opts_.save_every_epochs > 0 && epoch == 0)
      MS_FAIL("--save-every-epochs needs data with epochs (a dataset TOML); --data ", opts_.data,
              " is generated without end. Use --save-every");
    Rng rng(state.rng_state);
    Progress progress(state.step, opts_.steps, opts_.log_every);
    TrainSummary sum;
    sum.recomputed = !setup_.keep_block_acts;
    std::vector<double> losses;
    int64_t tokens = 0;  // of the steps run
    const auto t_run = std::chrono::steady_clock::now();
    InterruptGuard sigint;
    int64_t saved_step = state.step;   // the run starts from a saved state (or from scratch)
    const Batch* prepared = nullptr;   // the next step's batch, when made during the previous step's device work
    std::exception_ptr prepare_error;  // what making it threw: raised once the step it overlapped has finished
    const int ranks = comm_.size();
    bool stop = false;     // interrupted: on every rank at the same step boundary
    TrainSamples samples;  // the last ones drawn (rank 0)
    while (state.step < opts_.steps && !stop) {
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t t = state.step + 1, n = opts_.grad_accum;
      injected_rank_fault(t);
      const bool immediate = setup_.schedule == OptimizerSchedule::immediate;
      nonfinite_.start_step(t);
      std::string fault;  // the first non-finite batch of the step: the step is skipped
      double loss_sum = 0;
      uint64_t rng_after = 0;  // where a checkpoint of step t resumes
      int64_t step_tokens = 0;
      nlohmann::json shapes = nlohmann::json::array();
      for (int64_t k = 0; k < n; ++k) {  // the step's micro-batches (--grad-accum)
        if (prepare_error) std::rethrow_exception(prepare_error);
        const int64_t m = (t - 1) * n + k;
        Batch& batch = step_.batch(m);
        if (prepared != &batch) prepare(batch, state.data_position, rng);
        prepared = nullptr;
        const ModelDims d = batch.dims;
        if (fault.empty())
          fault = nonfinite_.check_batch(d, batch.x0.data(), batch.context.data(), state.data_position);
        if (ranks > 1 && comm_.sum(Channel::control, fault.empty() ? 0 : 1) > 0 && fault.empty())
          fault = "another rank's batch is not finite";  // every rank skips the step
        state.data_position += batch.clips;
        step_tokens += d.N() / d.B * batch.clips;
        shapes.push_back({d.F, d.H, d.W});
        const bool last = k + 1 == n;
        if (last) rng_after = rng.state();
        // Makes the next batch while this one computes; streamed, its inputs upload during the backward.
        auto prepare_next = [&] {
          if ((last && t >= opts_.steps) || sigint.interrupted()) return;
          try {
            prepare(step_.batch(m + 1), state.data_position, rng);
            prepared = &step_.batch(m + 1);
          } catch (...) {
            prepare_error = std::current_exception();
          }
        };
        const Micro micro{k, n, rank_weights(batch.clips, ranks)};
        if (fault.empty())
          loss_sum += micro.rank_weight[size_t(comm_.rank())] *
                      step_.step(batch, Update{t, state.clip_scale}, prepare_next, micro);
        else if (!last)  // the step is skipped; its batches are still drawn, as an unskipped step draws them
          prepare_next();
      }
      double loss = fault.empty() ? loss_sum / double(n) : step_.skip();
      stop = sigint.interrupted();
      if (ranks > 1) agree(loss, stop);
      double sumsq = 0;  // per stage, in stage order: the same sum in every schedule
      for (double x : step_.stage_sumsq()) sumsq += x;
      const double norm = std::sqrt(sumsq);
      const bool finite = fault.empty() && std::isfinite(loss) && std::isfinite(norm);
      const float scale = opts_.grad_clip > 0 && norm > opts_.grad_clip ? float(opts_.grad_clip / norm) : 1.0f;
      if (finite && immediate) state.clip_scale = scale;  // clips the next step
      if (finite && !immediate) step_.defer(Update{t, scale});
      if (!finite) {
        ++sum.skipped;
        const bool before_forward = !fault.empty();
        if (fault.empty()) fault = nonfinite_.locate(loss, norm, step_.stage_sumsq());
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
      if (lead)
        dir->append_metrics({{"step", t},
                             {"loss", loss},
                             {"lr", opts_.lr_at(t)},
                             {"grad_norm", norm},
                             {"seconds", secs},
                             {"tokens_per_second", tps},
                             {"device_peak_bytes", step_.device_peak_bytes()},
                             {"skipped", !finite},
                             {"shape", n == 1 ? shapes[0] : shapes},
                             {"tokens", step_tokens}});
      ++sum.steps_run;
      if (std::isfinite(loss)) losses.push_back(loss);
      if (lead) progress.update(t, loss, tps);
      if (sum.steps_run == 1) log_resident("the first step");
      const bool epoch_end = epoch > 0 && state.data_position % epoch == 0 && opts_.save_every_epochs > 0 &&
                             (state.data_position / epoch) % opts_.save_every_epochs == 0;
      if ((opts_.save_every > 0 && t % opts_.save_every == 0) || t == opts_.steps || epoch_end) {
        step_.apply_pending();
        save(state);
        saved_step = t;
      }
      if (opts_.samples.due(t, opts_.steps)) {
        step_.apply_pending();
        std::vector<uint16_t> gathered;
        const uint16_t* weights = working_weights(gathered);
        if (lead) {
          samples = write_train_samples(opts_.samples, opts_.out, cfg_, weights, t, sample_shape_, opts_.seed,
                                        sample_vae_.get(), text_encoder_.get());
          if (!samples.sheet.empty())
            dir->add_sample_sheet(t, samples.sheet, samples.sheet_width, samples.sheet_height);
        }
      }
    }
    if (lead) progress.finish();
    if (stop) {
      sum.interrupted = true;
      step_.apply_pending();
      if (state.step > 0 && saved_step != state.step) save(state);
      log_warn("interrupted after step ", state.step, "; checkpoint saved; continue with --resume ", opts_.out);
    }
    if (Trace* trace = step_.trace()) {
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
    if (lead && !samples.clips.empty() && !stop)
      log_info("samples of step ", state.step, ": ", samples.sheet.empty() ? "" : samples.sheet + " (contact sheet), ",
               samples.clips.size(), " clips ", fs::path(samples.clips.front()).parent_path().string(), "/step-",
               state.step, "-*", fs::path(samples.clips.front()).extension().string());
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
    TrainOptions kept = opts_;  // the schedule auto picked is saved, so that --resume continues it anywhere
    kept.runtime.optimizer_schedule = choice_of(setup_.schedule);
    save_checkpoint(opts_.out, {cfg_, table_, shards_, host_}, state, options_to_json(kept), opts_.save_format, comm_,
                    [&] {
                      if (state.step == hooks_.inject_rank_exit_saving) exit_as_last_rank("saving step", state.step);
                    });
    if (opts_.keep_last > 0 && comm_.rank() == 0) prune_checkpoints(opts_.out, opts_.keep_last);
  }

  // The bf16 working weights of every parameter on rank 0, what samples are drawn with: the pool of one rank, or every
  // rank's shards gathered there into `all` (a collective; null on the other ranks).
  const uint16_t* working_weights(std::vector<uint16_t>& all) {
    if (comm_.size() == 1) return host_.weights.data();
    all.resize(comm_.rank() == 0 ? size_t(table_.total()) : 0);
    gather_to_lead(comm_, table_, shards_, host_.weights.data(),
                   [&](size_t s, int64_t begin, const uint16_t* values, int64_t n) {
                     std::copy(values, values + n, all.data() + table_.stages()[s].offset + begin);
                   });
    return all.data();
  }

  // Several ranks, after a step: the loss (each rank's share of it), each stage's squared gradient norm (each rank's
  // shards') summed over the ranks in rank order, and whether any rank was interrupted.
  void agree(double& loss, bool& stop) {
    std::vector<double>& sumsq = step_.stage_sumsq();
    std::vector<double> mine{loss, stop ? 1.0 : 0.0};
    mine.insert(mine.end(), sumsq.begin(), sumsq.end());
    const std::vector<double> all = comm_.gather(Channel::control, mine);
    std::vector<double> total(mine.size(), 0.0);
    for (size_t r = 0; r < all.size() / mine.size(); ++r)
      for (size_t i = 0; i < mine.size(); ++i) total[i] += all[r * mine.size() + i];
    loss = total[0];
    stop = total[1] > 0;
    std::copy(total.begin() + 2, total.end(), sumsq.begin());
  }

  // Testing aids (TrainHooks): the last rank of a distributed run dies, or stops answering, as step t starts.
  void injected_rank_fault(int64_t t) const {
    if (t == hooks_.inject_rank_exit) exit_as_last_rank("at step", t);
    if (comm_.size() == 1 || comm_.rank() != comm_.size() - 1) return;
    if (t == hooks_.inject_rank_hang) {
      log_warn("rank ", comm_.rank(), ": hanging at step ", t, " (--inject-rank-hang)");
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
  }

  // The last rank of a distributed run exits as if killed (testing aids); `when` and t say where, for the log.
  void exit_as_last_rank(const char* when, int64_t t) const {
    if (comm_.size() == 1 || comm_.rank() != comm_.size() - 1) return;
    log_warn("rank ", comm_.rank(), ": exiting ", when, " ", t, " (testing aid)");
    std::_Exit(9);
  }

  // Makes the batch that starts at data position `position` and, streamed, enqueues its upload.
  void prepare(Batch& batch, int64_t position, Rng& rng) {
    batch_maker_.make(batch, position, rng, comm_.rank(), comm_.size());
    step_.enqueue_inputs(batch);
  }

  Communicator& comm_;
  TrainOptions opts_;
  StepShapes shapes_;  // the data's buckets at their largest batches
  RunSetup setup_;
  TrainHooks hooks_;
  ModelConfig cfg_;
  ParamTable table_;
  Shards shards_;  // this rank's part of the host state
  HostState host_;
  DataShape sample_shape_;  // the largest bucket's clip shape: what samples are drawn at
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<TextEncoder> text_encoder_;  // --t5: captions and sample prompts; null: the built-in hash
  BatchMaker batch_maker_;
  NonFiniteMonitor nonfinite_;
  TrainStep step_;
  std::unique_ptr<VaeWeights> sample_vae_;  // decodes latent samples (--vae); null: none
};

}  // namespace

TrainSummary train(const TrainOptions& opts, const TrainHooks& hooks, Communicator* comm) {
  Communicator& ranks = comm ? *comm : g_single;
  opts.validate();
  const fs::path out(opts.out);
  if (fs::exists(out / "latest"))
    MS_FAIL("run directory '", opts.out, "' already holds a run; continue it with --resume ", opts.out,
            " or choose another --out");
  ModelSource src = resolve_model(opts.model, opts.config, opts.expert);
  TrainOptions resolved = opts;
  resolved.make_paths_absolute();
  resolved.apply_expert(src.boundary);
  std::unique_ptr<Dataset> data = open_training_data(resolved, src.config, ranks.size());
  resolve_sample_prompts(resolved.samples, *data, false);
  Run run(resolved, hooks, src.config, std::move(data), false, ranks);
  log_resident("allocating the pools");
  run.load_model(src, opts.seed);
  log_resident("loading the model");
  TrainerState state;
  state.rng_state = opts.seed * 0x9e3779b97f4a7c15ull + 1;
  return run.run(state);
}

TrainSummary resume(const std::string& run_dir, int64_t steps, const TrainHooks& hooks, int64_t host_memory,
                    Communicator* comm) {
  Communicator& ranks = comm ? *comm : g_single;
  CheckpointInfo info = read_checkpoint_info(run_dir);
  TrainOptions opts = options_from_json(info.options);
  opts.out = run_dir;
  opts.runtime.host_memory = host_memory;
  if (steps > 0) opts.steps = steps;
  opts.validate();
  log_info("resuming ", run_dir, " from ", info.dir, " at step ", info.state.step, " of ", opts.steps);
  if (info.state.ranks != ranks.size())
    log_warn("the checkpoint was saved by ", info.state.ranks, " rank(s) and continues on ", ranks.size(),
             ": its optimizer state is re-sharded, and the global batch is now ", ranks.size(),
             " times the per-rank --batch-size");
  std::unique_ptr<Dataset> data = open_training_data(opts, info.config, ranks.size());
  resolve_sample_prompts(opts.samples, *data, true);
  Run run(opts, hooks, info.config, std::move(data), true, ranks);
  log_resident("allocating the pools");
  load_optimizer_state(info.dir, run.table(), run.shards(), run.host());
  log_resident("loading the checkpoint");
  return run.run(info.state);
}

}  // namespace ms
