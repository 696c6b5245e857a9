// Options of `megaslide train`; saved in trainer.json so that --resume continues the same run.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "sample/train_samples.h"
#include "train/adamw.h"
#include "train/flow_matching.h"

namespace ms {

struct ModelConfig;

struct TrainOptions {
  std::string model = "tiny";        // preset | model directory | weights file (with config)
  std::string config;                // config.json (with a weights file, or to override)
  std::string data = "synthetic";    // synthetic | moving-mnist | dataset .toml (docs/data.md)
  std::string mnist_dir;             // moving-mnist: IDX files ("": $MEGASLIDE_DATA or ~/.cache/megaslide)
  std::string on_bad_data = "skip";  // skip | fatal: an unreadable, corrupt or too-short data file
  // Pixels (pixel-space models) or latents; 0: the data's own (a TOML's target_frames / resolution,
  // a latent cache's shape, Moving-MNIST 20x64x64, synthetic 6x24x24). Resolved before the run starts.
  int64_t frames = 6, height = 24, width = 24;
  int64_t steps = 150, batch_size = 2;  // batch_size 0: the TOML's batch_size, else 2
  double lr = 2e-3, grad_clip = 1.0;
  int64_t warmup = 20;
  AdamWConfig adamw;
  FlowConfig flow;
  uint64_t seed = 0;
  std::string out = "runs/default";
  int64_t save_every = 100, log_every = 10;
  std::string save_format = "megaslide";  // megaslide | wan | diffusers: files beside model.safetensors (model/export.h)
  TrainSampleOptions samples;  // --sample-every N --sample-prompts FILE: OUT/samples/
  // runtime (DESIGN §5)
  std::string offload = "none";                 // none: every stage resident (the reference) | stream: layer streaming
  std::string optimizer_schedule = "deferred";  // deferred | immediate (DESIGN §5)
  int prefetch = 2;                             // stream: K weight slots
  int64_t device_memory = 0;                    // stream: arena budget in bytes (0: no limit)
  bool offload_activations = false;             // stream: block-input checkpoints in host memory
  std::string backend = "auto";       // cpu | cuda | auto (cuda where this run can use a GPU: resolve_backend)
  double link_gbps = 0;               // stream, CPU backend: emulated host link bandwidth per direction (0: memcpy)
  std::string trace;                  // Chrome trace JSON path ("" : none)
  bool serialize = false;             // stream: disable overlap (for `bench stream`)
  bool transfer_only = false;         // stream: skip every compute launch, time the copies alone (`bench stream`)
  std::string on_nonfinite = "skip";  // a step with non-finite data, activations or gradients: skip it | stop the run
  int64_t inject_nan_grad = 0;        // testing aid: poison this step's gradients with a NaN (0: never)
  int64_t inject_nan_activation = 0;  // testing aid: a NaN in block num_layers/2's output at this step (0: never)
  int64_t inject_inf_data = -1;       // testing aid: an Inf in the video of this data sample (-1: never)
  int64_t inject_data_error = -1;     // testing aid: loading this data sample fails (-1: never)

  // Throws ms::Error naming the bad value.
  void validate() const;
  // Makes the file and folder options absolute against the working directory, so that the options a run
  // stores for --resume mean the same from any directory (the model is read from the checkpoint then).
  void make_paths_absolute();
  // Learning rate at 1-based step t: linear warm-up, then constant.
  double lr_at(int64_t t) const;
};

// The backend this run computes on: cpu, or cuda where it is asked for (or auto) and the run can use the GPU
// (--offload stream, dense attention, a usable GPU, no CPU-only testing aid). Throws ms::Error when cuda is
// asked for and cannot be used, saying why.
std::string resolve_backend(const TrainOptions& o, const ModelConfig& c);

nlohmann::json options_to_json(const TrainOptions& o);
TrainOptions options_from_json(const nlohmann::json& j);

}  // namespace ms
