// `megaslide plan`: will a run fit on this GPU and host, and how fast can it go? (docs/analysis.md)
#include "plan/plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "core/check.h"
#include "core/units.h"
#include "plan/report.h"
#include "runtime/arena.h"
#include "train/option_table.h"

namespace ms::cli {
namespace {

// The runtime flags plan shares with train, parsed by train's option table into TrainOptions::runtime.
const std::vector<std::string> kSharedFlags = {"--offload",       "--optimizer-schedule",  "--recompute",  "--prefetch",
                                               "--device-memory", "--offload-activations", "--host-memory"};

struct PlanArgs {
  std::string preset, model;
  std::optional<int64_t> frames, height, width;  // absent: the preset's (PresetDefaults)
  int64_t batch = 1;
  std::string vae_stride;
  std::string attention, window;
  std::optional<int64_t> offset_groups;
  std::string hbm;
  int gpus_per_node = 1, nodes = 1;
  std::shared_ptr<TrainOptions> train = std::make_shared<TrainOptions>();  // .runtime: the shared flags
  std::string gpu = "h200";
  std::optional<double> tflops, host_link_gbps, host_mem_gbps;  // profile overrides
  std::string rates;                                            // --rates FILE: bench cuda --json lines
  bool json = false;
};

ModelConfig plan_model(const PlanArgs& a) {
  if (a.preset.empty() == a.model.empty()) MS_FAIL("pass exactly one of --preset NAME and --model config.json|DIR");
  if (!a.preset.empty()) return preset_config(a.preset);
  const std::filesystem::path p(a.model);
  if (std::filesystem::is_directory(p)) return load_config((p / "config.json").string());
  return load_config(a.model);
}

PlanInputs plan_inputs(const PlanArgs& a) {
  PlanInputs in;
  in.model = plan_model(a);
  if (!a.attention.empty()) in.model.attention.type = parse_name<AttentionType>(a.attention, "--attention");
  if (!a.window.empty()) in.model.attention.window = parse_triple(a.window, "--window");
  if (a.offset_groups) in.model.attention.offset_groups = *a.offset_groups;
  const PresetDefaults v = a.preset.empty() ? PresetDefaults{} : preset_defaults(a.preset);
  in.video = {a.batch, a.frames.value_or(v.frames), a.height.value_or(v.height), a.width.value_or(v.width),
              a.vae_stride.empty() ? v.vae_stride : parse_triple(a.vae_stride, "--vae-stride")};
  in.hw = hardware_profile(a.gpu);
  if (!a.hbm.empty()) in.hw.device_bytes = parse_bytes(a.hbm, "--hbm");
  if (a.tflops && !(*a.tflops > 0)) MS_FAIL("--tflops must be positive, got ", *a.tflops);
  if (a.tflops) in.hw.flops_per_s = *a.tflops * 1e12;
  if (a.host_link_gbps && !(*a.host_link_gbps >= 0))
    MS_FAIL("--host-link-gbps must be >= 0 (0: no link), got ", *a.host_link_gbps);
  if (a.host_link_gbps) in.hw.link_bytes_per_s = in.hw.link_peak_bytes_per_s = *a.host_link_gbps * 1e9;
  if (a.host_mem_gbps && !(*a.host_mem_gbps > 0)) MS_FAIL("--host-mem-gbps must be positive, got ", *a.host_mem_gbps);
  if (a.host_mem_gbps) in.hw.host_mem_bytes_per_s = *a.host_mem_gbps * 1e9;
  if (!a.rates.empty()) in.rates = read_kernel_rates(a.rates, default_kernel_rates(in.hw));
  const RuntimeOptions& r = a.train->runtime;
  for (const TrainOption& o : train_option_table())
    if (std::find(kSharedFlags.begin(), kSharedFlags.end(), o.flag) != kSharedFlags.end()) o.check(*a.train);
  r.validate();
  in.arena.prefetch = r.prefetch;
  in.arena.resident = r.offload == Offload::none;
  in.arena.offload_activations = r.offload_activations;
  in.arena.weight_bytes = in.hw.weight_bytes;
  in.arena.act_bytes = in.hw.act_bytes;
  in.arena.grad_slots = in.hw.grad_slots;
  in.device_memory = r.device_memory;
  in.host_budget = r.host_memory;
  in.schedule = schedule_of(r.optimizer_schedule);
  in.recompute = r.recompute;
  in.gpus_per_node = a.gpus_per_node;
  in.nodes = a.nodes;
  return in;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Will a training run fit, and how fast can it go: memory, traffic, FLOPs and step-time bounds");
  cmd->add_option(
      "--preset", a->preset, "Model preset: " + [] {
        std::string s;
        for (const auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }());
  cmd->add_option("--model", a->model, "config.json, or a model directory holding one");
  cmd->add_option("--frames", a->frames,
                  "Video frames (pixels; 4n+1 with a temporal VAE stride of 4; default: the preset's, 81 for Wan2.1 "
                  "and a --model, 121 for wan2.2-ti2v-5b)");
  cmd->add_option("--height", a->height,
                  "Frame height in pixels (padded up to VAE stride x patch; default: the preset's, 480 for Wan2.1 "
                  "and a --model)");
  cmd->add_option("--width", a->width,
                  "Frame width in pixels (padded up to VAE stride x patch; default: the preset's, 832 for Wan2.1 "
                  "and a --model)");
  cmd->add_option("--vae-stride", a->vae_stride,
                  "VAE compression t,h,w (default: the preset's; Wan2.1's VAE 4,8,8, Wan2.2's 4,16,16; per-frame "
                  "latents: 1,8,8)");
  cmd->add_option("--batch-size", a->batch, "Clips per step")->capture_default_str();
  cmd->add_option("--attention", a->attention,
                  "Self-attention: dense, window, dsa or dsa_fixed (default: the config's)");
  cmd->add_option("--window", a->window, "Attention window kt,kh,kw in tokens (default: the config's)");
  cmd->add_option("--offset-groups", a->offset_groups, "DSA offset groups G dividing num_heads (0: one per head)");
  a->train->runtime.offload = Offload::stream;  // plan's default: a model too large for the device is what it is for
  add_train_options(*cmd, a->train, kSharedFlags,
                    {{"--offload", " (plan's default: stream)"},
                     {"--device-memory", "; plan: the device budget of either schedule"},
                     {"--host-memory",
                      "; plan: host RAM for the pools, per machine (absent: the GPU profile's 1.5TB; "
                      "--gpu cpu: what this process can get)"}});
  cmd->add_option("--gpu", a->gpu, "Hardware profile: h200, h100-sxm, h100-nvl or cpu")->capture_default_str();
  cmd->add_option("--hbm", a->hbm, "Override the profile's device memory, e.g. 141GB");
  cmd->add_option("--tflops", a->tflops,
                  "Override the profile's peak bf16 rate, TFLOP/s (MFU's denominator; the default kernel rates are "
                  "fractions of it)");
  cmd->add_option("--rates", a->rates,
                  "The kernel rates to predict with: the JSON lines of `megaslide bench cuda --json` (GEMM, attention, "
                  "DSA, device copy); families it lacks keep their defaults");
  cmd->add_option("--host-link-gbps", a->host_link_gbps,
                  "Override the profile's host link, GB/s per direction (0: none; train's --link-gbps emulates one)");
  cmd->add_option("--host-mem-gbps", a->host_mem_gbps, "Override the host DRAM bandwidth, GB/s");
  cmd->add_option("--gpus-per-node", a->gpus_per_node,
                  "Distributed: GPUs (ranks) per machine, sharing its host memory (docs/distributed.md)")
      ->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Distributed: machines; above 1 the collectives run at the network's rate")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] {
    const Plan p = make_plan(plan_inputs(*a));
    if (a->json)
      std::printf("%s\n", plan_to_json(p).dump(2).c_str());
    else
      std::printf("%s", plan_to_table(p).c_str());
  });
}

}  // namespace ms::cli
