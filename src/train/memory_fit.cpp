#include "train/memory_fit.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/resident_model.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/parallel.h"
#include "core/units.h"
#include "model/param_table.h"
#include "registry/registry.h"
#include "sample/generate.h"
#include "vae/vae_model.h"
#include "vae/vae_weights.h"

namespace ms {
namespace {

std::string bytes(int64_t b) { return format_bytes(double(b)); }

// "N tokens per step (B x L)", or the range over the buckets.
std::string shapes_label(const StepShapes& shapes) {
  if (shapes.all.size() == 1)
    return cat(shapes.all[0].N(), " tokens per step (", shapes.all[0].B, " x ", shapes.all[0].L, ")");
  int64_t least = shapes.all[0].N();
  for (const ModelDims& d : shapes.all) least = std::min(least, d.N());
  return cat(shapes.all.size(), " buckets, ", least, " to ", shapes.most([](const ModelDims& d) { return d.N(); }),
             " tokens per full batch");
}

ScheduleChoice choice(OptimizerSchedule s) {
  return s == OptimizerSchedule::deferred ? ScheduleChoice::deferred : ScheduleChoice::immediate;
}

}  // namespace

std::string TrainHostNeed::breakdown() const {
  std::string s = cat("model state ", bytes(pools.persistent()), ", gradients ", bytes(pools.grads));
  if (pools.activations) s += cat(", offloaded checkpoints ", bytes(pools.activations));
  if (compute) s += cat(", CPU compute ", bytes(compute));
  s += cat(", batches ", bytes(batches));
  if (samples) s += cat(", samples ", bytes(samples));
  return s;
}

TrainHostNeed train_host_need(const TrainOptions& o, OptimizerSchedule s, const ModelConfig& c,
                              const StepShapes& shapes, BackendKind backend) {
  const ParamTable table(c);
  const bool streamed = o.offload == Offload::stream;
  StreamOptions so;
  so.prefetch = o.prefetch;
  so.offload_activations = o.offload_activations;
  so.ranks = o.ranks;
  const DevicePlan arena = streamed ? backend_arena(backend, c, shapes, so) : DevicePlan{};
  TrainHostNeed need;
  need.pools = host_pools(table, arena, s, streamed, o.grad_accum, o.ranks);
  if (!streamed)  // StepSchedule's f32 copy of the weights and the resident model's workspace
    need.compute = 4 * table.total() + ResidentModel<float>::workspace_bytes(c, shapes, o.keep_block_acts);
  else if (backend == BackendKind::cpu)  // the arena is host memory
    need.compute = arena.peak();
  if (!streamed && o.ranks > 1)  // every rank's working weights gathered, and this rank's share of a reduced backward
    need.compute += 2 * table.total() + 4 * Shards(table, 0, o.ranks).total();
  // Two batches (clean video, noised input, target, context, timesteps), the noise, the velocity and its gradient.
  const int64_t in = shapes.most([&](const ModelDims& d) { return d.B * c.in_dim * d.F * d.H * d.W; });
  const int64_t out = shapes.most([&](const ModelDims& d) { return d.B * c.out_dim * d.F * d.H * d.W; });
  const int64_t B = shapes.most([](const ModelDims& d) { return d.B; });
  need.batches = 4 * (2 * (3 * in + B * c.text_len * c.text_dim + B) + in + 2 * out);
  if (o.samples.every > 0) {
    // Counted on every rank, though only rank 0 samples: every rank must resolve the auto options alike (fitted()).
    const bool decoded = !o.samples.vae.empty() && c.in_dim != 3;  // load_sample_vae loads the VAE at start
    const VaeConfig vc = decoded ? VaeWeights::config_for(o.samples.vae, o.samples.vae_config) : VaeConfig();
    if (decoded) need.samples += 4 * VaeWeights::count_for(vc);  // its f32 weights, held from the start
    if (o.samples.every <= o.steps) {                            // a sample falls due
      // Rank 0 draws it after a step, its buffers still held: an f32 copy of every weight and a forward workspace at
      // the largest clip (write_train_samples), and in a distributed run every rank's bf16 weights gathered first.
      const ModelDims* largest = &shapes.all.front();
      for (const ModelDims& d : shapes.all)
        if (d.F * d.H * d.W > largest->F * largest->H * largest->W) largest = &d;
      const DataShape clip{c.in_dim, largest->F, largest->H, largest->W};
      int64_t drawing = sample_host_bytes(c, clip, false);  // the f32 weights, the forward's workspace, the clips
      if (decoded) {
        // The VAE's pass runs once the forward's workspace is returned but the f32 weights are not: the latents, the
        // f32 pixels, the RGB frames and the pass's own activations (vae_decode_bytes, the sample verb's count).
        const int64_t F = vc.video_frames(clip.frames), H = clip.height * vc.space_stride(),
                      W = clip.width * vc.space_stride();
        const int64_t decoding = 4 * table.total() + 4 * clip.channels * clip.frames * clip.height * clip.width +
                                 (4 + 1) * 3 * F * H * W + vae_decode_bytes(vc, F, H, W);
        drawing = std::max(drawing, decoding);
      }
      need.samples += drawing + (o.ranks > 1 ? 2 * table.total() : 0);
    }
  }
  return need;
}

void fit_host_memory(TrainOptions& o, const ModelConfig& c, const StepShapes& shapes, BackendKind backend,
                     bool resumed) {
  HostLimit limit = host_limit(o.host_memory);
  if (o.local_ranks > 1) {  // the ranks on this machine share it
    limit.bytes /= o.local_ranks;
    limit.source += cat(", shared by the ", o.local_ranks, " ranks on this machine");
  }
  const auto need = [&](OptimizerSchedule s, const TrainOptions& v) {
    return train_host_need(v, s, c, shapes, backend);
  };
  const bool can_be_immediate = o.grad_accum == 1;  // the immediate schedule takes one micro-batch per step
  std::optional<OptimizerSchedule> picked;
  if (o.optimizer_schedule == ScheduleChoice::automatic) {
    const TrainHostNeed deferred = need(OptimizerSchedule::deferred, o);
    if (deferred.total() <= limit.bytes || !can_be_immediate) {
      picked = OptimizerSchedule::deferred;
    } else if (need(OptimizerSchedule::immediate, o).total() <= limit.bytes) {
      picked = OptimizerSchedule::immediate;
      log_info("--optimizer-schedule auto: immediate (the deferred schedule's full gradient pool would need ",
               bytes(deferred.total()), " of host memory; ", limit.source, " leaves ", bytes(limit.bytes), ")");
    } else {
      picked = OptimizerSchedule::deferred;
    }
  } else {
    picked = o.schedule();
  }
  // Then the activations: kept from the forward where asked for, or where they fit (auto), on a resident run.
  TrainOptions kept = o;
  kept.keep_block_acts = o.offload == Offload::none && o.recompute != Recompute::always;
  const int64_t kept_need = kept.keep_block_acts ? need(*picked, kept).total() : 0;
  const bool keep = kept.keep_block_acts && (o.recompute == Recompute::never || kept_need <= limit.bytes);
  if (o.offload == Offload::none && o.recompute == Recompute::automatic)
    log_info("--recompute auto: ", keep ? "never (every block keeps its activations" : "always (kept activations",
             keep ? "" : cat(" would need ", bytes(kept_need)), ")");
  o.keep_block_acts = keep;
  const TrainHostNeed n = need(*picked, o);
  if (n.total() > limit.bytes) {
    // The smallest change that fits, trying the flags that leave the result the same first.
    std::string fix;
    std::vector<std::pair<std::string, TrainOptions>> tries;
    TrainOptions v = o;
    if (o.keep_block_acts) {
      v.keep_block_acts = false;
      v.recompute = Recompute::always;
      tries.push_back({"--recompute always", v});
    }
    if (*picked == OptimizerSchedule::deferred && can_be_immediate) {
      v.optimizer_schedule = choice(OptimizerSchedule::immediate);
      tries.push_back({v.recompute == Recompute::always && o.recompute != Recompute::always
                           ? "--recompute always --optimizer-schedule immediate"
                           : "--optimizer-schedule immediate",
                       v});
    }
    if (o.samples.every > 0) {
      TrainOptions w = o;
      w.samples.every = 0;
      tries.push_back({"the run without --sample-every", w});
    }
    if (o.offload == Offload::none) {
      TrainOptions w = o;
      w.offload = Offload::stream;
      w.keep_block_acts = false;
      w.recompute = Recompute::automatic;
      w.optimizer_schedule = choice(*picked);
      tries.push_back({"--offload stream", w});
      if (*picked == OptimizerSchedule::deferred && can_be_immediate) {
        w.optimizer_schedule = choice(OptimizerSchedule::immediate);
        tries.push_back({"--offload stream --optimizer-schedule immediate", w});
      }
    }
    for (const auto& [flags, t] : tries) {
      const int64_t b = need(t.schedule(), t).total();
      if (b <= limit.bytes) {
        fix = cat(flags, " needs ", bytes(b), " and fits");
        break;
      }
    }
    if (fix.empty())
      fix = cat("fewer frames, a smaller resolution or batch, a smaller model, or a machine with more memory (",
                "`megaslide plan` shows what a run needs)");
    if (resumed)
      fix = cat("A resumed run keeps its saved options: free host memory, or start a new run from its checkpoint ",
                "(--model ", o.out, "/latest) with ", fix);
    require_host_memory("this run", n.total(), cat(n.breakdown(), "; ", *picked, " optimizer schedule"), limit, fix);
  }
  o.optimizer_schedule = choice(*picked);
  const ParamTable table(c);
  log_info("model: ", table.total(), " parameters, ", c.num_layers, " blocks, dim ", c.dim, "; ", shapes_label(shapes),
           "; host memory ", bytes(n.total()), " of ", bytes(limit.bytes), " (", n.breakdown(), "); ", *picked,
           " optimizer schedule; ", o.keep_block_acts ? "activations kept" : "blocks recomputed", "; ", num_threads(),
           " threads; backend ", backend,
           backend == BackendKind::cpu ? cat(" (OpenBLAS ", cpu::openblas_coretype(), " kernels)") : std::string());
  if (const std::string note = cpu::openblas_coretype_note(); backend == BackendKind::cpu && !note.empty())
    log_info(note);
}

}  // namespace ms
