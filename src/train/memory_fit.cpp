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
#include "model/vae_weights.h"
#include "registry/registry.h"
#include "sample/generate.h"
#include "vae/vae_model.h"

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

}  // namespace

std::string TrainHostNeed::breakdown() const {
  std::string s = cat("model state ", bytes(pools.persistent()), ", gradients ", bytes(pools.grads));
  if (pools.activations) s += cat(", offloaded checkpoints ", bytes(pools.activations));
  if (compute) s += cat(", CPU compute ", bytes(compute));
  s += cat(", batches ", bytes(batches));
  if (samples) s += cat(", samples ", bytes(samples));
  return s;
}

TrainHostNeed train_host_need(const TrainOptions& o, const RunSetup& r, const ModelConfig& c,
                              const StepShapes& shapes) {
  const ParamTable table(c);
  const bool streamed = o.runtime.offload == Offload::stream;
  const DevicePlan arena =
      streamed ? backend_arena(r.backend, c, shapes, stream_options(o.runtime, r.ranks)) : DevicePlan{};
  TrainHostNeed need;
  need.pools = host_pools(table, arena, r.schedule, streamed, o.grad_accum, r.ranks);
  if (!streamed)  // TrainStep's f32 copy of the weights and the resident model's workspace
    need.compute = 4 * table.total() + ResidentModel<float>::workspace_bytes(c, shapes, r.keep_block_acts);
  else if (r.backend == BackendKind::cpu)  // the arena is host memory
    need.compute = arena.peak();
  if (!streamed && r.ranks > 1)  // every rank's working weights gathered, and this rank's share of a reduced backward
    need.compute += 2 * table.total() + 4 * Shards(table, 0, r.ranks).total();
  // Two batches (clean video, noised input, target, context, timesteps), the noise, the velocity and its gradient.
  const int64_t in = shapes.most([&](const ModelDims& d) { return d.B * c.in_dim * d.F * d.H * d.W; });
  const int64_t out = shapes.most([&](const ModelDims& d) { return d.B * c.out_dim * d.F * d.H * d.W; });
  const int64_t B = shapes.most([](const ModelDims& d) { return d.B; });
  need.batches = 4 * (2 * (3 * in + B * c.text_len * c.text_dim + B) + in + 2 * out);
  if (o.samples.draws()) {
    // Counted on every rank, though only rank 0 samples: every rank must resolve the auto options alike (resolve_run).
    const bool decoded = !o.samples.vae.empty() && c.in_dim != 3;  // load_sample_vae loads the VAE at start
    const VaeConfig vc = decoded ? VaeWeights::config_for(o.samples.vae, o.samples.vae_config) : VaeConfig();
    if (decoded) need.samples += 4 * VaeWeights::count_for(vc);  // its f32 weights, held from the start
    if (!o.samples.no_final || o.samples.every <= o.steps) {     // a sample falls due
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
      need.samples += drawing + (r.ranks > 1 ? 2 * table.total() : 0);
    }
  }
  return need;
}

void fit_host_memory(const TrainOptions& o, RunSetup& r, const ModelConfig& c, const StepShapes& shapes, bool resumed) {
  const RuntimeOptions& ro = o.runtime;
  HostLimit limit = host_limit(ro.host_memory);
  if (r.local_ranks > 1) {  // the ranks on this machine share it
    limit.bytes /= r.local_ranks;
    limit.source += cat(", shared by the ", r.local_ranks, " ranks on this machine");
  }
  const auto need = [&](const TrainOptions& v, const RunSetup& w) { return train_host_need(v, w, c, shapes); };
  const bool can_be_immediate = o.grad_accum == 1;  // the immediate schedule takes one micro-batch per step
  r.keep_block_acts = false;
  if (ro.optimizer_schedule == ScheduleChoice::automatic) {
    RunSetup deferred = r, immediate = r;
    deferred.schedule = OptimizerSchedule::deferred;
    immediate.schedule = OptimizerSchedule::immediate;
    const TrainHostNeed d = need(o, deferred);
    if (d.total() <= limit.bytes || !can_be_immediate) {
      r.schedule = OptimizerSchedule::deferred;
    } else if (need(o, immediate).total() <= limit.bytes) {
      r.schedule = OptimizerSchedule::immediate;
      log_info("--optimizer-schedule auto: immediate (the deferred schedule's full gradient pool would need ",
               bytes(d.total()), " of host memory; ", limit.source, " leaves ", bytes(limit.bytes), ")");
    } else {
      r.schedule = OptimizerSchedule::deferred;
    }
  } else {
    r.schedule = *schedule_of(ro.optimizer_schedule);
  }
  // Then the activations: kept from the forward where asked for, or where they fit (auto), on a resident run.
  RunSetup kept = r;
  kept.keep_block_acts = ro.offload == Offload::none && ro.recompute != Recompute::always;
  const int64_t kept_need = kept.keep_block_acts ? need(o, kept).total() : 0;
  r.keep_block_acts = kept.keep_block_acts && (ro.recompute == Recompute::never || kept_need <= limit.bytes);
  if (ro.offload == Offload::none && ro.recompute == Recompute::automatic)
    log_info("--recompute auto: ",
             r.keep_block_acts ? "never (every block keeps its activations" : "always (kept activations",
             r.keep_block_acts ? "" : cat(" would need ", bytes(kept_need)), ")");
  const TrainHostNeed n = need(o, r);
  if (n.total() > limit.bytes) {
    // The smallest change that fits, trying the flags that leave the result the same first.
    struct Try {
      std::string flags;
      TrainOptions o;
      RunSetup r;
    };
    std::vector<Try> tries;
    Try v{"", o, r};
    if (r.keep_block_acts) {
      v.r.keep_block_acts = false;
      v.o.runtime.recompute = Recompute::always;
      v.flags = "--recompute always";
      tries.push_back(v);
    }
    if (r.schedule == OptimizerSchedule::deferred && can_be_immediate) {
      v.r.schedule = OptimizerSchedule::immediate;
      v.flags = v.o.runtime.recompute == Recompute::always && ro.recompute != Recompute::always
                    ? "--recompute always --optimizer-schedule immediate"
                    : "--optimizer-schedule immediate";
      tries.push_back(v);
    }
    if (o.samples.draws()) {
      Try w{o.samples.every > 0 ? "the run without --sample-every, with --no-final-samples," : "--no-final-samples", o,
            r};
      w.o.samples.every = 0;
      w.o.samples.no_final = true;
      tries.push_back(w);
    }
    if (ro.offload == Offload::none) {
      Try w{"--offload stream", o, r};
      w.o.runtime.offload = Offload::stream;
      w.o.runtime.recompute = Recompute::automatic;
      w.r.keep_block_acts = false;
      tries.push_back(w);
      if (r.schedule == OptimizerSchedule::deferred && can_be_immediate) {
        w.r.schedule = OptimizerSchedule::immediate;
        w.flags = "--offload stream --optimizer-schedule immediate";
        tries.push_back(w);
      }
    }
    std::string fix;
    for (const Try& t : tries) {
      const int64_t b = need(t.o, t.r).total();
      if (b <= limit.bytes) {
        fix = cat(t.flags, " needs ", bytes(b), " and fits");
        break;
      }
    }
    if (fix.empty())
      fix = cat("fewer frames, a smaller resolution or batch, a smaller model, or a machine with more memory (",
                "`megaslide plan` shows what a run needs)");
    if (resumed)
      fix = cat("A resumed run keeps its saved options: free host memory, or start a new run from its checkpoint ",
                "(--model ", o.out, "/latest) with ", fix);
    require_host_memory("this run", n.total(), cat(n.breakdown(), "; ", r.schedule, " optimizer schedule"), limit, fix);
  }
  const ParamTable table(c);
  log_info("model: ", table.total(), " parameters, ", c.num_layers, " blocks, dim ", c.dim, "; ", shapes_label(shapes),
           "; host memory ", bytes(n.total()), " of ", bytes(limit.bytes), " (", n.breakdown(), "); ", r.schedule,
           " optimizer schedule; ", r.keep_block_acts ? "activations kept" : "blocks recomputed", "; ", num_threads(),
           " threads; backend ", r.backend,
           r.backend == BackendKind::cpu ? cat(" (OpenBLAS ", cpu::openblas_coretype(), " kernels)") : std::string());
  if (const std::string note = cpu::openblas_coretype_note(); r.backend == BackendKind::cpu && !note.empty())
    log_info(note);
}

}  // namespace ms
