// Options of `megaslide train`, typed: each is declared once in the option table (train/option_table.h), which
// registers its flag, checks it and saves it in trainer.json so that --resume continues the same run.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/enum_names.h"
#include "data/dataset.h"
#include "model/export.h"
#include "model/loader.h"
#include "runtime/runtime_options.h"
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

// The learning-rate scheduler after the warm-up (docs/training.md: diffusers' schedulers, as musubi-tuner uses them).
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

struct TrainOptions {
  std::string model = "tiny-t4";   // preset | model directory | weights file (with config)
  std::string config;              // config.json (with a weights file, or to override)
  std::string data = "synthetic";  // synthetic | synthetic-new-colours | moving-mnist | dataset .toml (docs/data.md)
  std::string mnist_dir;           // moving-mnist: IDX files ("": $MEGASLIDE_DATA or ~/.cache/megaslide)
  BadDataPolicy on_bad_data = BadDataPolicy::skip;
  // Pixels (pixel-space models) or latents; 0: the data's own (a TOML's target_frames / resolution,
  // a latent cache's shape, Moving-MNIST 20x64x64, synthetic 4x16x16). Resolved before the run starts.
  int64_t frames = 4, height = 16, width = 16;
  int64_t steps = 6000, batch_size = 8;  // batch_size 0: a TOML entry's batch_size, else 2
  int64_t grad_accum = 1;                // batches per optimizer step (their gradients averaged)
  double lr = 2e-3, grad_clip = 1.0;
  int64_t warmup = 20;
  LrScheduler lr_scheduler = LrScheduler::cosine;
  int64_t lr_cycles = 1;  // cosine_with_restarts: hard restarts over the decay
  AdamWConfig adamw;
  FlowConfig flow{.sampling = TimestepSampling::logit_normal};
  Expert expert = Expert::none;  // Wan2.2 A14B: the expert trained, over its side of the boundary
  double boundary = 0;  // the experts' boundary (fraction of 1000 timesteps); 0: the model folder's, else Wan's
  uint64_t seed = 0;
  std::string out = "runs/default";
  int64_t save_every = 1000, log_every = 100;
  int64_t save_every_epochs = 0;  // also checkpoint at the end of every N-th epoch of the data (0: never)
  int64_t keep_last = 0;          // keep only the N newest checkpoints (0: all)
  double caption_dropout = 0;     // probability of training a clip on the empty prompt
  double i2v_ratio = 0;  // TI2V: probability of an image-to-video step (first latent frame clean, at t = 0, no loss)
  std::string empty_prompt;              // the empty prompt's text-encoder cache file (cached text embeddings)
  std::string t5, tokenizer, t5_config;  // the umT5 encoder for captions and samples ("": the built-in hash)
  SaveFormat save_format = SaveFormat::megaslide;  // files beside model.safetensors (model/export.h)
  TrainSampleOptions samples;                      // OUT/samples/
  RuntimeOptions runtime;                          // docs/runtime.md
  std::string trace;                               // Chrome trace JSON path ("" : none)
  NonFinitePolicy on_nonfinite = NonFinitePolicy::skip;
  double collective_timeout =
      1800;  // distributed: seconds before a silent rank stops the run (this machine's, never saved)

  // Throws ms::Error naming the bad value: each option's own check (the option table), then the combinations.
  void validate() const;
  // --expert: restricts the training timesteps to the expert's side of the boundary (--boundary, else the model
  // folder's `model_boundary` when positive, else Wan's T2V-A14B 0.875), which it records in `boundary`. Explicit
  // --min-timestep / --max-timestep must lie on that side (throws ms::Error naming both).
  void apply_expert(double model_boundary);
  // Makes the file and folder options absolute against the working directory, so that the options a run
  // stores for --resume mean the same from any directory (the model is read from the checkpoint then).
  void make_paths_absolute();
  // Learning rate at 1-based step t of `steps`: lr times the --lr-scheduler's factor (docs/training.md).
  double lr_at(int64_t t) const;
};

// The default job until session 28, which the tests and `bench train` / `bench stream` run (their baselines in
// docs/benchmarks.md): the tiny preset, 150 steps of 2 clips of 6 x 24 x 24, uniform timesteps, a constant learning
// rate after the warm-up, checkpoints every 100 steps.
TrainOptions baseline_job();

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

}  // namespace ms
