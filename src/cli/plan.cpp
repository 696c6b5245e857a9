// `megaslide plan`: will a run fit on this GPU and host, and how fast can it go? (docs/analysis.md)
#include "plan/plan.h"

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

namespace ms::cli {
namespace {

struct PlanArgs {
  std::string preset, model;
  int64_t frames = 81, height = 480, width = 832, batch = 1;
  std::string vae_stride = "4,8,8";
  std::string attention, window;
  std::optional<int64_t> offset_groups;
  std::string device_memory, host_memory, hbm;
  int prefetch = 2;
  int gpus_per_node = 1, nodes = 1;
  bool offload_activations = false;
  Offload offload = Offload::stream;
  std::string gpu = "h200";
  std::optional<double> tflops, link_gbps, host_mem_gbps;  // profile overrides
  std::optional<OptimizerSchedule> schedule;               // absent: auto
  Recompute recompute = Recompute::automatic;
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
  in.video = {a.batch, a.frames, a.height, a.width, parse_triple(a.vae_stride, "--vae-stride")};
  in.hw = hardware_profile(a.gpu);
  if (!a.hbm.empty()) in.hw.device_bytes = parse_bytes(a.hbm, "--hbm");
  if (a.tflops && !(*a.tflops > 0)) MS_FAIL("--tflops must be positive, got ", *a.tflops);
  if (a.tflops) in.hw.flops_per_s = *a.tflops * 1e12;
  if (a.link_gbps && !(*a.link_gbps >= 0)) MS_FAIL("--link-gbps must be >= 0 (0: no link), got ", *a.link_gbps);
  if (a.link_gbps) in.hw.link_bytes_per_s = in.hw.link_peak_bytes_per_s = *a.link_gbps * 1e9;
  if (a.host_mem_gbps && !(*a.host_mem_gbps > 0)) MS_FAIL("--host-mem-gbps must be positive, got ", *a.host_mem_gbps);
  if (a.host_mem_gbps) in.hw.host_mem_bytes_per_s = *a.host_mem_gbps * 1e9;
  in.arena.prefetch = a.prefetch;
  in.arena.resident = a.offload == Offload::none;
  in.arena.offload_activations = a.offload_activations;
  in.arena.weight_bytes = in.hw.weight_bytes;
  in.arena.act_bytes = in.hw.act_bytes;
  in.arena.grad_slots = in.hw.grad_slots;
  if (!a.device_memory.empty()) in.device_memory = parse_device_memory(a.device_memory);
  if (!a.host_memory.empty()) in.host_budget = parse_bytes(a.host_memory, "--host-memory");
  if (!a.host_memory.empty() && in.host_budget <= 0) MS_FAIL("--host-memory must be positive");
  in.schedule = a.schedule;
  if (a.recompute == Recompute::never && !in.arena.resident)
    MS_FAIL("--recompute never needs --offload none: a streamed run recomputes each block from its input");
  in.recompute = a.recompute;
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
  cmd->add_option("--frames", a->frames, "Video frames (pixels; 4n+1 with a temporal VAE stride of 4)")
      ->capture_default_str();
  cmd->add_option("--height", a->height, "Frame height in pixels (padded up to VAE stride x patch)")
      ->capture_default_str();
  cmd->add_option("--width", a->width, "Frame width in pixels (padded up to VAE stride x patch)")
      ->capture_default_str();
  cmd->add_option("--vae-stride", a->vae_stride, "VAE compression t,h,w (Wan: 4,8,8; per-frame latents: 1,8,8)")
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch, "Clips per step")->capture_default_str();
  cmd->add_option("--attention", a->attention,
                  "Self-attention: dense, window, dsa or dsa_fixed (default: the config's)");
  cmd->add_option("--window", a->window, "Attention window kt,kh,kw in tokens (default: the config's)");
  cmd->add_option("--offset-groups", a->offset_groups, "DSA offset groups G dividing num_heads (0: one per head)");
  cmd->add_option(
      "--device-memory", a->device_memory,
      "Device arena budget, e.g. 80GiB, 120GB (default: the GPU's memory less 2 GB; cpu: this machine's RAM)");
  cmd->add_option("--prefetch", a->prefetch, "Weight slots K >= 2 (one computing, K-1 loading)")->capture_default_str();
  cmd->add_flag("--offload-activations", a->offload_activations, "Keep block-input checkpoints in host memory");
  cmd->add_option_function<std::string>(
         "--offload", [a](const std::string& v) { a->offload = parse_name<Offload>(v, "--offload"); },
         "Weights: stream (from host, layer by layer) or none (all resident)")
      ->default_str(name_of(Offload::stream));
  cmd->add_option("--gpu", a->gpu, "Hardware profile: h200, h100-sxm, h100-nvl or cpu")->capture_default_str();
  cmd->add_option("--hbm", a->hbm, "Override the profile's device memory, e.g. 141GB");
  cmd->add_option("--tflops", a->tflops, "Override the profile's dense GEMM rate, TFLOP/s");
  cmd->add_option("--link-gbps", a->link_gbps, "Override the host link, GB/s per direction (0: none)");
  cmd->add_option("--host-mem-gbps", a->host_mem_gbps, "Override the host DRAM bandwidth, GB/s");
  cmd->add_option("--host-memory", a->host_memory,
                  "Host RAM for the pools, per machine (default: 1.5TB; cpu: what this process can get)");
  cmd->add_option("--gpus-per-node", a->gpus_per_node,
                  "Distributed: GPUs (ranks) per machine, sharing its host memory (docs/distributed.md)")
      ->capture_default_str();
  cmd->add_option("--nodes", a->nodes, "Distributed: machines; above 1 the collectives run at the network's rate")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--optimizer-schedule,--schedule",
         [a](const std::string& v) {
           if (v == "auto")
             a->schedule.reset();
           else if (v == name_of(OptimizerSchedule::deferred) || v == name_of(OptimizerSchedule::immediate))
             a->schedule = parse_name<OptimizerSchedule>(v, "--optimizer-schedule");
           else
             MS_FAIL("--optimizer-schedule ", quote_text(v), " is unknown; use auto, ",
                     choices_of<OptimizerSchedule>());
         },
         "Optimizer schedule, as train's: auto (deferred if it fits), deferred, immediate")
      ->default_str("auto");
  cmd->add_option_function<std::string>(
         "--recompute", [a](const std::string& v) { a->recompute = parse_name<Recompute>(v, "--recompute"); },
         "As train's: resident runs (--offload none) keep every block's activations (never) or recompute them "
         "(always); auto keeps them where the run then fits")
      ->default_str("auto");
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
