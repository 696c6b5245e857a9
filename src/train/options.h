// Options of `megaslide train`, typed: each is declared once in the option table (train/option_table.h), which
// registers its flag, checks it and saves it in trainer.json so that --resume continues the same run.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/enum_names.h"
#include "data/dataset.h"
#include "model/export.h"
#include "runtime/arena.h"
#include "runtime/backend.h"
#include "sample/train_samples.h"
#include "train/adamw.h"
#include "train/flow_matching.h"

namespace ms {

struct ModelConfig;

// A step with non-finite data, activations or gradients: skip its update and keep training, or stop the run.
enum class NonFinitePolicy { skip, stop };
template <>
struct EnumNames<NonFinitePolicy> {
  static constexpr std::array<EnumName<NonFinitePolicy>, 2> values{
      {{NonFinitePolicy::skip, "skip"}, {NonFinitePolicy::stop, "stop"}}};
};

// The learning-rate schedule after the warm-up (docs/training.md: diffusers' schedules, as musubi-tuner uses them).
enum class LrScheduler { constant, constant_with_warmup, linear, cosine, cosine_with_restarts };
template <>
struct EnumNames<LrScheduler> {
  static constexpr std::array<EnumName<LrScheduler>, 5> values{
      {{LrScheduler::constant, "constant"},
       {LrScheduler::constant_with_warmup, "constant_with_warmup"},
       {LrScheduler::linear, "linear"},
       {LrScheduler::cosine, "cosine"},
       {LrScheduler::cosine_with_restarts, "cosine_with_restarts"}}};
};

// --optimizer-schedule: auto is deferred where its full gradient pool fits in host memory, else immediate
// (train/memory_fit.h); a run stores the schedule it picked, so that --resume continues it anywhere.
enum class ScheduleChoice { automatic, deferred, immediate };
template <>
struct EnumNames<ScheduleChoice> {
  static constexpr std::array<EnumName<ScheduleChoice>, 3> values{{{ScheduleChoice::automatic, "auto"},
                                                                   {ScheduleChoice::deferred, "deferred"},
                                                                   {ScheduleChoice::immediate, "immediate"}}};
};

struct TrainOptions {
  std::string model = "tiny";      // preset | model directory | weights file (with config)
  std::string config;              // config.json (with a weights file, or to override)
  std::string data = "synthetic";  // synthetic | moving-mnist | dataset .toml (docs/data.md)
  std::string mnist_dir;           // moving-mnist: IDX files ("": $MEGASLIDE_DATA or ~/.cache/megaslide)
  BadDataPolicy on_bad_data = BadDataPolicy::skip;
  // Pixels (pixel-space models) or latents; 0: the data's own (a TOML's target_frames / resolution,
  // a latent cache's shape, Moving-MNIST 20x64x64, synthetic 6x24x24). Resolved before the run starts.
  int64_t frames = 6, height = 24, width = 24;
  int64_t steps = 150, batch_size = 2;  // batch_size 0: a TOML entry's batch_size, else 2
  int64_t grad_accum = 1;               // batches per optimizer step (their gradients averaged)
  double lr = 2e-3, grad_clip = 1.0;
  int64_t warmup = 20;
  LrScheduler lr_scheduler = LrScheduler::constant_with_warmup;
  int64_t lr_cycles = 1;  // cosine_with_restarts: hard restarts over the decay
  AdamWConfig adamw;
  FlowConfig flow;
  uint64_t seed = 0;
  std::string out = "runs/default";
  int64_t save_every = 100, log_every = 10;
  int64_t save_every_epochs = 0;         // also checkpoint at the end of every N-th epoch of the data (0: never)
  int64_t keep_last = 0;                 // keep only the N newest checkpoints (0: all)
  double caption_dropout = 0;            // probability of training a clip on the empty prompt
  std::string empty_prompt;              // the empty prompt's text-encoder cache file (cached text embeddings)
  std::string t5, tokenizer, t5_config;  // the umT5 encoder for captions and samples ("": the built-in hash)
  SaveFormat save_format = SaveFormat::megaslide;  // files beside model.safetensors (model/export.h)
  TrainSampleOptions samples;                      // OUT/samples/
  // runtime (docs/runtime.md)
  Offload offload = Offload::none;
  ScheduleChoice optimizer_schedule = ScheduleChoice::automatic;
  Recompute recompute = Recompute::automatic;
  bool keep_block_acts = false;  // --recompute resolved for this start by fit_host_memory (not an option, not saved)
  int prefetch = 2;              // stream: K weight slots
  int64_t device_memory = 0;     // stream: arena budget in bytes (0: absent, the backend's default_device_memory)
  bool offload_activations = false;  // stream: block-input checkpoints in host memory
  BackendChoice backend = BackendChoice::automatic;
  double link_gbps = 0;  // stream, CPU backend: emulated host link bandwidth per direction (0: memcpy)
  std::string trace;     // Chrome trace JSON path ("" : none)
  NonFinitePolicy on_nonfinite = NonFinitePolicy::skip;
  int64_t host_memory = 0;  // bytes this run may use in host memory (0: detected; this machine's, never saved)
  double collective_timeout =
      1800;  // distributed: seconds before a silent rank stops the run (this machine's, never saved)
  int ranks = 1, local_ranks = 1;  // a distributed run's ranks, and those on this machine (set from the launch: not
                                   // options, not saved)

  // Throws ms::Error naming the bad value: each option's own check (the option table), then the combinations.
  void validate() const;
  // Makes the file and folder options absolute against the working directory, so that the options a run
  // stores for --resume mean the same from any directory (the model is read from the checkpoint then).
  void make_paths_absolute();
  // The optimizer schedule of a run whose --optimizer-schedule is resolved (fit_host_memory): deferred or immediate.
  OptimizerSchedule schedule() const;
  // Learning rate at 1-based step t of `steps`: lr times the schedule's factor (docs/training.md).
  double lr_at(int64_t t) const;
};

// Aids for tests and benchmarks: they change what a run does but are never saved with it, so a resumed run has none.
struct TrainHooks {
  int64_t inject_nan_grad = 0;        // poison this step's gradients with a NaN (0: never)
  int64_t inject_nan_activation = 0;  // a NaN in block num_layers/2's output at this step (0: never)
  int64_t inject_inf_data = -1;       // an Inf in the video of this data sample (-1: never)
  int64_t inject_data_error = -1;     // loading this data sample fails (-1: never)
  bool serialize = false;             // stream: no overlap between copies and compute (`bench stream`)
  bool skip_compute = false;          // stream: enqueue the copies alone, no compute launch (`bench stream`)
  int64_t inject_rank_exit = 0;  // distributed: the last rank exits (as if killed) when this step starts (0: never)
  int64_t inject_rank_hang = 0;  // distributed: the last rank stops answering when this step starts (0: never)
  int64_t inject_rank_exit_saving = 0;  // distributed: the last rank exits as the checkpoint of this step is being
                                        // saved, rank 0 having begun it (0: never)
};

// The backend this run computes on: cpu, or cuda where it is asked for (or auto) and the run can use the GPU
// (--offload stream, a usable GPU, kernels that take the model, no CPU-only aid). Throws ms::Error when cuda is
// asked for and cannot be used, saying why.
BackendKind resolve_backend(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c);

}  // namespace ms
