#include "plan/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/units.h"

namespace ms {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string count(double n) {  // 104.88 B, 1.42 B, 2.09 M
  if (n >= 1e9) return fmt("%.2f B", n / 1e9);
  if (n >= 1e6) return fmt("%.2f M", n / 1e6);
  return fmt("%.0f", n);
}

std::string seconds(double s) {
  return s >= 100 ? fmt("%.0f s", s) : s >= 1 ? fmt("%.2f s", s) : fmt("%.1f ms", s * 1e3);
}

}  // namespace

nlohmann::json plan_to_json(const Plan& p) {
  const auto& c = p.in.model;
  const auto& d = p.latent.dims;
  const auto& hw = p.in.hw;
  const auto& v = p.device;
  const auto& h = p.host;
  using nlohmann::json;
  auto rate = [](const KernelRate& r) { return json{{"per_s", r.per_s}, {"source", r.source}}; };
  return json{
      {"model",
       {{"dim", c.dim},
        {"ffn_dim", c.ffn_dim},
        {"num_heads", c.num_heads},
        {"num_layers", c.num_layers},
        {"attention", name_of(c.attention.type)},
        {"window", c.attention.window}}},
      {"hardware",
       {{"name", hw.name},
        {"device_bytes", hw.device_bytes},
        {"flops_per_s", hw.flops_per_s},
        {"link_bytes_per_s", hw.link_bytes_per_s},
        {"link_peak_bytes_per_s", hw.link_peak_bytes_per_s},
        {"host_mem_bytes_per_s", hw.host_mem_bytes_per_s},
        {"peer_bytes_per_s", hw.peer_bytes_per_s},
        {"network_bytes_per_s", hw.network_bytes_per_s},
        {"source", hw.source}}},
      {"video",
       {{"batch", d.B},
        {"frames", p.in.video.frames},
        {"height", p.latent.height},
        {"width", p.latent.width},
        {"vae_stride", p.in.video.vae_stride},
        {"latent", {d.F, d.H, d.W}},
        {"token_grid", {d.f, d.h, d.w}}}},
      {"param_count", p.params},
      {"stage_params",
       {{"stem", p.stem_params},
        {"block", p.block_params},
        {"blocks", c.num_layers},
        {"head", p.head_params},
        {"largest", v.stage_numel}}},
      {"schedule", name_of(p.schedule)},
      {"ranks",
       {{"gpus_per_node", p.in.gpus_per_node},
        {"nodes", p.in.nodes},
        {"total", p.ranks},
        {"gather_bytes", p.collectives.gather_bytes},
        {"scatter_bytes", p.collectives.scatter_bytes},
        {"collective_bytes_per_s", p.collectives.bytes_per_s},
        {"gather_s", p.collectives.gather_s},
        {"scatter_s", p.collectives.scatter_s}}},
      {"host_bytes",
       {{"weights", h.weights},
        {"master", h.master},
        {"exp_avg", h.exp_avg},
        {"exp_avg_sq", h.exp_avg_sq},
        {"grads", h.grads},
        {"activations", h.activations},
        {"persistent", h.persistent()},
        {"total", h.total()}}},
      {"host_needed", p.host_needed},
      {"host_budget", p.host_budget},
      {"tokens", d.N()},
      {"tokens_per_sample", d.L},
      {"device_bytes",
       {{"weight_slots", v.weight_slots},
        {"grad_slots", v.grad_slots},
        {"checkpoints", v.checkpoints},
        {"recompute", v.recompute},
        {"kept_acts", v.kept_acts},
        {"attention", v.attention},
        {"other", v.other},
        {"inputs", v.inputs},
        {"peak", v.peak()}}},
      {"device_budget", p.device_budget},
      {"activations_kept", p.in.arena.keep_block_acts},
      {"h2d_bytes", p.traffic.h2d()},
      {"d2h_bytes", p.traffic.d2h()},
      {"traffic",
       {{"h2d_weights", p.traffic.h2d_weights},
        {"h2d_activations", p.traffic.h2d_activations},
        {"d2h_grads", p.traffic.d2h_grads},
        {"d2h_activations", p.traffic.d2h_activations},
        {"host_dram", p.host_dram_bytes}}},
      {"flops",
       {{"gemm", p.flops.gemm}, {"attention", p.flops.attention}, {"dsa", p.flops.dsa}, {"total", p.flops.total()}}},
      {"model_flops",
       {{"gemm", p.model_flops.gemm},
        {"attention", p.model_flops.attention},
        {"dsa", p.model_flops.dsa},
        {"total", p.model_flops.total()}}},
      {"memory_bytes", p.memory_bytes},
      {"kernel_rates",
       {{"gemm", rate(p.rates.gemm)},
        {"attention", rate(p.rates.attention)},
        {"dsa", rate(p.rates.dsa)},
        {"memory", rate(p.rates.memory)}}},
      {"compute_s",
       {{"gemm", p.compute.gemm},
        {"attention", p.compute.attention},
        {"dsa", p.compute.dsa},
        {"memory", p.compute.memory}}},
      {"bounds", {{"compute_s", p.bounds.compute}, {"link_s", p.bounds.link}, {"host_memory_s", p.bounds.host_memory}}},
      {"bound_by", p.bound_by},
      {"predicted_step_s", p.step_s},
      {"predicted_step_serial_s", p.step_serial_s},
      {"mfu", p.mfu},
      {"mfu_serial", p.mfu_serial},
      {"fits", p.fits},
      {"reason", join(p.reasons, "; ")},
      {"suggestion", p.suggestion},
      {"notes", p.notes}};
}

std::string plan_to_table(const Plan& p) {
  const auto& c = p.in.model;
  const auto& d = p.latent.dims;
  const auto& hw = p.in.hw;
  const auto& v = p.device;
  const auto& h = p.host;
  std::string s;
  auto line = [&](const std::string& name, const std::string& value) {
    s += "  " + name + std::string(name.size() < 20 ? 20 - name.size() : 1, ' ') + value + "\n";
  };
  auto bytes = [](int64_t b) { return format_bytes(double(b)); };
  s += cat("model   dim ", c.dim, ", ffn ", c.ffn_dim, ", ", c.num_heads, " heads, ", c.num_layers, " blocks, ",
           c.attention.type, " attention",
           c.attention.type == AttentionType::dense
               ? std::string()
               : cat(" ", c.attention.window[0], "x", c.attention.window[1], "x", c.attention.window[2]),
           "\n");
  line("parameters",
       cat(count(double(p.params)), " (", p.params, "): stem ", count(double(p.stem_params)), ", ", c.num_layers,
           " x block ", count(double(p.block_params)), ", head ", count(double(p.head_params))));
  s += cat("video   ", d.B, " x ", p.in.video.frames, " frames ", p.latent.height, "x", p.latent.width, ", VAE stride ",
           p.in.video.vae_stride[0], ",", p.in.video.vae_stride[1], ",", p.in.video.vae_stride[2], "\n");
  line("latent / tokens", cat(d.F, "x", d.H, "x", d.W, " -> ", d.f, "x", d.h, "x", d.w, " = ", count(double(d.N())),
                              " tokens (", d.N(), ")"));
  if (p.ranks > 1)
    s += cat("ranks   ", p.in.gpus_per_node, " GPUs x ", p.in.nodes, " machines = ", p.ranks, " ranks, each holding 1/",
             p.ranks, " of the host state; per GPU below, host memory per machine\n");
  s += cat("host    ", bytes(p.host_needed), " of ", bytes(p.host_budget), ", ", p.schedule, " optimizer schedule",
           p.in.gpus_per_node > 1
               ? cat(" (", p.in.gpus_per_node, " ranks x ", bytes(p.host_needed / p.in.gpus_per_node), ")")
               : std::string(),
           "\n");
  line("persistent", cat(bytes(h.persistent()), ": weights ", bytes(h.weights), ", master ", bytes(h.master),
                         ", moments ", bytes(h.exp_avg + h.exp_avg_sq)));
  line("grads", cat(bytes(h.grads), p.schedule == OptimizerSchedule::deferred ? " (full fp32 pool)"
                                    : p.in.arena.resident                     ? " (the resident backward's fp32 pool)"
                                                          : cat(" (", kImmediateStaging, " stage buffers)")));
  if (h.activations) line("activations", bytes(h.activations) + " (offloaded checkpoints)");
  s += cat("device  ", bytes(v.peak()), " of ", bytes(p.device_budget), " (", hw.name, ")\n");
  line("weight slots", bytes(v.weight_slots) +
                           (p.in.arena.resident ? std::string(" (every stage resident)")
                                                : cat(" (", p.in.arena.prefetch, " x ", count(double(v.stage_numel)),
                                                      " x ", p.in.arena.weight_bytes, " B)")));
  line("grad slots", cat(bytes(v.grad_slots), " (", p.in.arena.grad_slots, " x fp32)"));
  line("checkpoints", bytes(v.checkpoints) + (p.in.arena.offload_activations ? " (3 staging slots)" : ""));
  line("block recompute", bytes(v.recompute));
  if (p.in.arena.keep_block_acts)
    line("kept activations",
         cat(bytes(v.kept_acts), " (--recompute never: ", p.in.model.num_layers - 1, " more blocks')"));
  line("attention", bytes(v.attention));
  line("other + inputs", bytes(v.other + v.inputs));
  s += "step\n";
  line("H2D / D2H", cat(bytes(p.traffic.h2d()), " / ", bytes(p.traffic.d2h())));
  if (p.ranks > 1)
    line("collectives", cat("all-gather ", bytes(p.collectives.gather_bytes), " ", seconds(p.collectives.gather_s),
                            ", reduce-scatter ", bytes(p.collectives.scatter_bytes), " ",
                            seconds(p.collectives.scatter_s), " at ", format_bytes(p.collectives.bytes_per_s), "/s (",
                            p.in.nodes > 1 ? "network" : "between the GPUs of a machine", ")"));
  line("FLOPs", cat(fmt("%.3g", p.flops.total()), " (GEMM ", fmt("%.3g", p.flops.gemm), ", attention ",
                    fmt("%.3g", p.flops.attention), ", DSA ", fmt("%.3g", p.flops.dsa),
                    p.in.arena.keep_block_acts ? "; activations kept, nothing recomputed)" : "; recompute included)"));
  s += "kernel rates  " + describe(p.rates) + "\n";
  line("compute bound", cat(seconds(p.bounds.compute), " (GEMM ", seconds(p.compute.gemm), ", attention ",
                            seconds(p.compute.attention), ", DSA ", seconds(p.compute.dsa), ", memory-bound ",
                            seconds(p.compute.memory), " for ", bytes(int64_t(p.memory_bytes)), ")"));
  line("host link bound",
       hw.unified() && p.ranks == 1
           ? std::string("none (device memory is host memory)")
           : seconds(p.bounds.link) + (hw.unified()
                                           ? std::string(" (the collectives)")
                                           : fmt(" at %.0f GB/s", hw.link_bytes_per_s / 1e9) +
                                                 (hw.link_peak_bytes_per_s != hw.link_bytes_per_s
                                                      ? fmt(" (%.0f theoretical)", hw.link_peak_bytes_per_s / 1e9)
                                                      : "") +
                                                 (p.ranks > 1 ? " with the collectives on its streams" : "")));
  line("host memory bound", seconds(p.bounds.host_memory) + cat(" (", bytes(p.host_dram_bytes), " at ",
                                                                format_bytes(hw.host_mem_bytes_per_s), "/s)"));
  line("predicted step", cat(seconds(p.step_s), " overlapped (", p.bound_by, " bound), MFU ",
                             fmt("%.0f%%", 100 * p.mfu), "; ", seconds(p.step_serial_s), " serial, MFU ",
                             fmt("%.0f%%", 100 * p.mfu_serial), " of ", fmt("%.0f TFLOP/s", hw.flops_per_s / 1e12)));
  s += p.fits ? "fits    yes\n" : "fits    NO: " + join(p.reasons, "; ") + "\n";
  if (!p.suggestion.empty()) s += "try     " + p.suggestion + "\n";
  for (const auto& n : p.notes) s += "note    " + n + "\n";
  return s;
}

}  // namespace ms
