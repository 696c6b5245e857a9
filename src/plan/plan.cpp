#include "plan/plan.h"

#include <algorithm>
#include <functional>

#include "core/check.h"
#include "core/units.h"
#include "model/param_table.h"
#include "runtime/shards.h"

namespace ms {
namespace {

// Everything but the suggestion and the choice of --recompute (in.arena.keep_block_acts as given).
Plan evaluate_kept(const PlanInputs& in) {
  Plan p;
  p.in = in;
  if (in.device_memory < 0 || in.host_budget < 0) MS_FAIL("memory budgets must be positive");
  const auto& hw = in.hw;
  if (hw.device_bytes <= 0 || hw.flops_per_s <= 0 || hw.host_mem_bytes_per_s <= 0 || hw.link_bytes_per_s < 0)
    MS_FAIL("hardware profile '", hw.name, "': device memory, FLOP rate and host memory bandwidth must be positive ",
            "and the link bandwidth >= 0 (check --hbm, --tflops, --host-mem-gbps, --link-gbps)");
  if (in.rates)
    for (const KernelRate* r : {&in.rates->gemm, &in.rates->attention, &in.rates->dsa, &in.rates->memory})
      if (!(r->per_s > 0)) MS_FAIL("kernel rates must be positive (", r->source, ")");
  const ModelConfig& c = in.model;
  c.validate();
  p.latent = latent_shape(c, in.video);
  const ModelDims& d = p.latent.dims;
  p.notes = p.latent.notes;

  const ParamTable table(c);
  p.params = table.total();
  const auto& st = table.stages();
  p.stem_params = st.front().numel;
  p.head_params = st.back().numel;
  p.block_params = c.num_layers ? st[1].numel : 0;
  for (size_t i = 1; i + 1 < st.size(); ++i) MS_CHECK(st[i].numel == p.block_params, "block ", i - 1, " differs");

  if (in.gpus_per_node < 1 || in.nodes < 1)
    MS_FAIL("--gpus-per-node and --nodes must be >= 1, got ", in.gpus_per_node, " and ", in.nodes);
  p.ranks = in.gpus_per_node * in.nodes;
  const int R = p.ranks;
  ArenaOptions arena = in.arena;
  arena.ranks = R;
  p.device = plan_device(c, d, arena);
  p.device_budget = in.device_memory ? in.device_memory : hw.device_bytes - hw.reserve_bytes;
  p.host_budget = in.host_budget ? in.host_budget : hw.host_bytes;
  const int64_t arena_in_host = hw.unified() ? p.device.peak() : 0;
  const bool streamed = !in.arena.resident;
  const bool deferred =
      in.schedule
          ? *in.schedule == OptimizerSchedule::deferred
          : in.gpus_per_node * (host_pools(table, p.device, OptimizerSchedule::deferred, streamed, 1, R).total() +
                                arena_in_host) <=
                p.host_budget;
  p.schedule = deferred ? OptimizerSchedule::deferred : OptimizerSchedule::immediate;
  p.host = host_pools(table, p.device, p.schedule, streamed, 1, R);
  p.host_needed = in.gpus_per_node * (p.host.total() + arena_in_host);

  p.traffic = step_traffic(table, p.device, arena);
  auto& co = p.collectives;  // each GPU moves its chunks over the link and the rest between GPUs
  co.gather_bytes = p.traffic.h2d_weights * (R - 1) / R;
  co.scatter_bytes = p.traffic.d2h_grads * (R - 1) / R;
  p.traffic.h2d_weights /= R;
  p.traffic.d2h_grads /= R;
  co.bytes_per_s = in.nodes > 1 ? hw.network_bytes_per_s : hw.peer_bytes_per_s;
  if (R > 1 && co.bytes_per_s <= 0)
    MS_FAIL("hardware profile '", hw.name, "' has no rate between devices for ", R, " ranks");
  co.gather_s = R > 1 ? double(co.gather_bytes) / co.bytes_per_s : 0;
  co.scatter_s = R > 1 ? double(co.scatter_bytes) / co.bytes_per_s : 0;
  p.host_dram_bytes =
      in.gpus_per_node * ((kOptimizerBytesPerParam * p.params + R - 1) / R + p.traffic.h2d() + p.traffic.d2h());
  p.flops = in.arena.keep_block_acts ? model_step_flops(c, d) : train_step_flops(c, d);  // what is executed
  p.model_flops = model_step_flops(c, d);
  const double link = hw.link_bytes_per_s;
  p.rates = in.rates ? *in.rates : default_kernel_rates(hw);
  p.memory_bytes = step_memory_bytes(c, d, in.arena.act_bytes, !in.arena.keep_block_acts);
  p.compute = {p.flops.gemm / p.rates.gemm.per_s, p.flops.attention / p.rates.attention.per_s,
               p.flops.dsa / p.rates.dsa.per_s, p.memory_bytes / p.rates.memory.per_s};
  p.bounds.compute = p.compute.total();
  const double up = hw.unified() ? 0 : double(p.traffic.h2d()) / link,
               down = hw.unified() ? 0 : double(p.traffic.d2h()) / link;
  p.bounds.link = std::max(up + co.gather_s, down + co.scatter_s);
  p.bounds.host_memory = double(p.host_dram_bytes) / hw.host_mem_bytes_per_s;
  p.step_s = std::max({p.bounds.compute, p.bounds.link, p.bounds.host_memory});
  p.bound_by = p.step_s == p.bounds.compute ? "compute" : p.step_s == p.bounds.link ? "host link" : "host memory";
  p.step_serial_s = p.bounds.compute +
                    double(in.gpus_per_node * kOptimizerBytesPerParam * p.params / R) / hw.host_mem_bytes_per_s + up +
                    down + co.gather_s + co.scatter_s;
  p.mfu = p.model_flops.total() / (p.step_s * hw.flops_per_s);
  p.mfu_serial = p.model_flops.total() / (p.step_serial_s * hw.flops_per_s);

  if (p.device_budget > hw.device_bytes)
    p.reasons.push_back(cat("--device-memory ", format_bytes(double(p.device_budget)), " exceeds the ", hw.name, "'s ",
                            format_bytes(double(hw.device_bytes))));
  if (p.device.peak() > p.device_budget) {
    const auto& v = p.device;
    p.reasons.push_back(cat(
        "device arena ", format_bytes(double(v.peak())), " exceeds the budget ", format_bytes(double(p.device_budget)),
        " (weights ", format_bytes(double(v.weight_slots)), ", grads ", format_bytes(double(v.grad_slots)),
        ", checkpoints ", format_bytes(double(v.checkpoints)), ", block recompute ", format_bytes(double(v.recompute)),
        ", attention ", format_bytes(double(v.attention)), ", other ", format_bytes(double(v.other + v.inputs)), ")"));
  }
  if (p.host_needed > p.host_budget)
    p.reasons.push_back(cat("host memory ", format_bytes(double(p.host_needed)), " (", p.schedule, " schedule",
                            in.gpus_per_node > 1 ? cat(", ", in.gpus_per_node, " ranks a machine") : std::string(),
                            ") exceeds --host-memory ", format_bytes(double(p.host_budget))));
  p.fits = p.reasons.empty();
  return p;
}

// Everything but the suggestion: --recompute resolved as train resolves it (resident runs keep every block's
// activations where asked, or under auto where the run then fits).
Plan evaluate(const PlanInputs& given) {
  PlanInputs in = given;
  in.arena.keep_block_acts = in.arena.resident && in.recompute != Recompute::always;
  if (!in.arena.keep_block_acts || in.recompute == Recompute::never) return evaluate_kept(in);
  Plan kept = evaluate_kept(in);
  if (kept.fits) return kept;
  in.arena.keep_block_acts = false;
  return evaluate_kept(in);
}

// Pixel frames of the longest video with at most `latent_frames` latent frames that fits, or 0.
int64_t largest_fitting_frames(PlanInputs in, int64_t latent_frames) {
  const int64_t st = in.video.vae_stride[0];
  auto frames_of = [&](int64_t F) { return st > 1 ? (F - 1) * st + 1 : F; };
  auto fits = [&](int64_t F) {
    in.video.frames = frames_of(F);
    return evaluate(in).fits;
  };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = latent_frames;  // fits(lo); hi may not
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return frames_of(lo);
}

// A byte count rounded up to whole GB, as a flag value: "140GB".
std::string ceil_gb(int64_t bytes) { return cat((bytes + 999'999'999) / 1'000'000'000, "GB"); }

// The smallest change that makes `in` fit, as command-line flags: first flags that leave the result unchanged
// (optimizer schedule, prefetch depth, where checkpoints live), alone or together; then a shorter video with the
// combination of those flags that allows the longest; then more memory. Flags are joined by spaces.
std::string suggest(const PlanInputs& in, const Plan& p) {
  struct Change {
    std::string flag;
    std::function<void(PlanInputs&)> apply;
  };
  std::vector<Change> free;
  if (p.schedule == OptimizerSchedule::deferred && p.host_needed > p.host_budget)
    free.push_back(
        {"--optimizer-schedule immediate", [](PlanInputs& v) { v.schedule = OptimizerSchedule::immediate; }});
  if (!in.arena.resident && !in.arena.offload_activations)
    free.push_back({"--offload-activations", [](PlanInputs& v) { v.arena.offload_activations = true; }});
  if (in.arena.offload_activations)  // host memory may be what is short
    free.push_back({"no --offload-activations", [](PlanInputs& v) { v.arena.offload_activations = false; }});
  if (in.arena.resident)
    free.push_back({"--offload stream", [](PlanInputs& v) { v.arena.resident = false; }});
  else if (in.arena.prefetch > 2)
    free.push_back({"--prefetch 2", [](PlanInputs& v) { v.arena.prefetch = 2; }});
  // Every subset of the free changes, fewest flags first.
  std::vector<std::pair<std::string, PlanInputs>> variants;
  for (size_t size = 0; size <= free.size(); ++size)
    for (unsigned mask = 0; mask < (1u << free.size()); ++mask) {
      if (size_t(__builtin_popcount(mask)) != size) continue;
      PlanInputs v = in;
      std::string flags;
      for (size_t i = 0; i < free.size(); ++i)
        if (mask >> i & 1) {
          free[i].apply(v);
          flags += free[i].flag + " ";
        }
      variants.push_back({flags, v});
    }
  for (const auto& [flags, v] : variants)
    if (!flags.empty() && evaluate(v).fits) return flags.substr(0, flags.size() - 1);
  // A distributed plan short of host memory: the fewest machines whose shards fit (up to 4096).
  if ((in.nodes > 1 || in.gpus_per_node > 1) && p.device.peak() <= p.device_budget) {
    PlanInputs v = in;
    for (v.nodes = in.nodes * 2; v.nodes <= 4096 && !evaluate(v).fits; v.nodes *= 2) {
    }
    if (v.nodes <= 4096) {
      int lo = std::max(in.nodes + 1, v.nodes / 2), hi = v.nodes;  // fits(hi)
      while (lo < hi) {
        v.nodes = (lo + hi) / 2;
        if (evaluate(v).fits)
          hi = v.nodes;
        else
          lo = v.nodes + 1;
      }
      return cat("--nodes ", hi);
    }
  }
  int64_t best_frames = 0;
  std::string best;
  for (auto [flags, v] : variants) {
    if (v.video.batch > 1) {
      v.video.batch = 1;
      flags += "--batch-size 1 ";
      if (evaluate(v).fits) return flags.substr(0, flags.size() - 1);
    }
    const int64_t frames = largest_fitting_frames(v, p.latent.dims.F);
    if (frames > best_frames) {
      best_frames = frames;
      best = cat(flags, "--frames ", frames);
    }
  }
  if (best_frames) return best;
  std::vector<std::string> more;
  if (p.device.peak() > p.device_budget)
    more.push_back(p.device.peak() <= in.hw.device_bytes
                       ? cat("--device-memory ", ceil_gb(p.device.peak()))
                       : cat("a device with >= ", ceil_gb(p.device.peak()), " (the ", in.hw.name, " has ",
                             format_bytes(double(in.hw.device_bytes)), ")"));
  if (p.host_needed > p.host_budget) more.push_back(cat("--host-memory ", ceil_gb(p.host_needed)));
  return more.empty() ? "" : more.size() == 1 ? more[0] : more[0] + " and " + more[1];
}

}  // namespace

HostPools host_pools(const ParamTable& t, const DevicePlan& dev, OptimizerSchedule schedule, bool streamed,
                     int64_t grad_accum, int ranks) {
  const Shards shards(t, 0, ranks);
  const int64_t P = shards.total();
  HostPools h;
  h.weights = 2 * P;
  h.master = h.exp_avg = h.exp_avg_sq = 4 * P;
  h.grads = 4 * gradient_floats(t, shards, schedule, streamed, grad_accum).total();
  h.activations = dev.checkpoints_host;
  return h;
}

Traffic step_traffic(const ParamTable& t, const DevicePlan& dev, const ArenaOptions& o) {
  Traffic tr;
  const int64_t P = t.total();
  if (o.resident) {
    tr.h2d_weights = P * o.weight_bytes;  // the optimizer's new weights, uploaded once per step
  } else {
    // The backward starts with the last K forward stages still in their slots.
    int64_t kept = 0;
    const auto& st = t.stages();
    for (size_t i = st.size() - std::min(st.size(), size_t(o.prefetch)); i < st.size(); ++i) kept += st[i].numel;
    tr.h2d_weights = (2 * P - kept) * o.weight_bytes;
  }
  tr.d2h_grads = o.grad_slots ? 4 * P : 0;
  tr.d2h_activations = tr.h2d_activations = dev.checkpoints_host;  // each offloaded checkpoint out and back once
  return tr;
}

Plan make_plan(const PlanInputs& in) {
  Plan p = evaluate(in);
  if (!p.fits) p.suggestion = suggest(in, p);
  if (p.in.model.attention.type == AttentionType::dense)
    p.notes.push_back(
        cat("dense attention is flash-style (online softmax): scores are never stored; a kernel that "
            "materialised one layer's scores would need ",
            format_bytes(double(p.device.scores_if_materialised)), " more"));
  return p;
}

}  // namespace ms
