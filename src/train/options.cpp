#include "train/options.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "model/config.h"
#include "registry/registry.h"
#include "train/option_table.h"

namespace ms {

void TrainOptions::make_paths_absolute() {
  auto absolute = [](std::string& p) {
    if (!p.empty()) p = std::filesystem::absolute(p).lexically_normal().string();
  };
  if (!is_generated_data(data)) absolute(data);
  for (std::string* p : {&mnist_dir, &trace, &samples.prompts, &out, &empty_prompt}) absolute(*p);
}

void TrainOptions::validate() const {
  for (const TrainOption& option : train_option_table()) option.check(*this);
  const RuntimeOptions& r = runtime;
  if (grad_accum > 1 && r.optimizer_schedule == ScheduleChoice::immediate)
    MS_FAIL("--grad-accum ", grad_accum,
            " needs --optimizer-schedule deferred: the immediate schedule updates each "
            "stage as soon as one batch's gradients land");
  r.validate();
  // The resident schedule runs on the CPU backend, with no device arena or link.
  if (r.offload == Offload::none && (r.device_memory > 0 || r.link_gbps > 0 || r.offload_activations))
    MS_FAIL("--device-memory, --link-gbps and --offload-activations apply to --offload stream; add --offload stream");
  if (const std::string gpu = r.backend == BackendChoice::cuda ? backend_unavailable(BackendKind::cuda) : "";
      !gpu.empty())
    MS_FAIL("--backend cuda: ", gpu, "; or use --backend cpu");
  ms::validate(samples);
  ms::validate(flow);
  if (boundary != 0 && expert == Expert::none) MS_FAIL("--boundary ", boundary, " applies with --expert high|low");
}

void TrainOptions::apply_expert(double model_boundary) {
  if (expert == Expert::none) return;
  const std::string from = boundary > 0 ? "--boundary" : model_boundary > 0 ? "the folder's boundary_ratio"
                                                                            : "Wan's T2V-A14B";
  const double b = expert_boundary(boundary, model_boundary);
  const double lo = expert == Expert::high ? 1000 * b : 0, hi = expert == Expert::high ? 1000 : 1000 * b;
  if (flow.min_timestep != 0 || flow.max_timestep != 1000) {  // given: must lie on the expert's side
    if (flow.min_timestep < lo || flow.max_timestep > hi)
      MS_FAIL("--min-timestep ", flow.min_timestep, " and --max-timestep ", flow.max_timestep, " leave the ",
              name_of(expert), "-noise expert's timesteps [", lo, ", ", hi, "] (boundary ", b, ", ", from, ")");
  } else {
    flow.min_timestep = lo;
    flow.max_timestep = hi;
  }
  boundary = b;
  log_info("--expert ", name_of(expert), ": training timesteps [", flow.min_timestep, ", ", flow.max_timestep,
           "] of 1000 (boundary ", b, ", ", from, ")");
}

TrainOptions baseline_job() {
  TrainOptions o;
  o.model = "tiny";
  o.frames = 6, o.height = 24, o.width = 24;
  o.steps = 150, o.batch_size = 2;
  o.lr_scheduler = LrScheduler::constant_with_warmup;
  o.flow.sampling = TimestepSampling::uniform;
  o.save_every = 100, o.log_every = 10;
  return o;
}

// diffusers' lambdas at the 1-based step t (diffusers evaluates its step k at k - 1; megaslide's warm-up reaches lr at
// step `warmup`, so that saved runs resume on the same rates).
double TrainOptions::lr_at(int64_t t) const {
  if (lr_scheduler == LrScheduler::constant) return lr;
  if (t < warmup) return lr * double(t) / double(warmup);
  if (lr_scheduler == LrScheduler::constant_with_warmup) return lr;
  const double progress = steps > warmup ? double(t - warmup) / double(steps - warmup) : 1.0;
  constexpr double kPi = 3.14159265358979323846;
  switch (lr_scheduler) {
    case LrScheduler::linear:
      return lr * std::max(0.0, 1.0 - progress);
    case LrScheduler::cosine:  // half a cosine (diffusers' num_cycles 0.5)
      return lr * std::max(0.0, 0.5 * (1.0 + std::cos(kPi * progress)));
    case LrScheduler::cosine_with_restarts:
      if (progress >= 1.0) return 0.0;
      return lr * std::max(0.0, 0.5 * (1.0 + std::cos(kPi * std::fmod(double(lr_cycles) * progress, 1.0))));
    default:
      return lr;
  }
}

}  // namespace ms
