#include "train/options.h"

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "model/config.h"
#include "registry/registry.h"
#include "train/option_table.h"

namespace ms {

void TrainOptions::make_paths_absolute() {
  auto absolute = [](std::string& p) {
    if (!p.empty()) p = std::filesystem::absolute(p).lexically_normal().string();
  };
  if (data != "synthetic" && data != "moving-mnist") absolute(data);
  for (std::string* p : {&mnist_dir, &trace, &samples.prompts, &out}) absolute(*p);
}

void TrainOptions::validate() const {
  for (const TrainOption& option : train_option_table()) option.check(*this);
  if (offload == Offload::none && (device_memory > 0 || link_gbps > 0 || offload_activations))
    MS_FAIL("--device-memory, --link-gbps and --offload-activations apply to --offload stream; add --offload stream");
  if (const std::string gpu = backend == BackendChoice::cuda ? backend_unavailable(BackendKind::cuda) : "";
      !gpu.empty())
    MS_FAIL("--backend cuda: ", gpu, "; or use --backend cpu");
  ms::validate(samples);
}

BackendKind resolve_backend(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c) {
  if (o.backend == BackendChoice::cpu) return BackendKind::cpu;
  const std::string why = [&]() -> std::string {  // what keeps this run off the GPU
    if (std::string gpu = backend_unavailable(BackendKind::cuda); !gpu.empty()) return gpu;
    if (o.offload != Offload::stream)
      return "the resident schedule (--offload none) runs on the CPU backend; add --offload stream";
    if (std::string kernels = stage_runner_refuses(BackendKind::cuda, c); !kernels.empty()) return kernels;
    if (o.link_gbps > 0) return "--link-gbps emulates a host link on the CPU backend";
    if (hooks.inject_nan_activation > 0)
      return "--inject-nan-activation poisons activations in host memory, on the CPU backend";
    return "";
  }();
  if (why.empty()) return BackendKind::cuda;
  if (o.backend == BackendChoice::cuda) MS_FAIL("--backend cuda: ", why, "; or use --backend cpu");
  return BackendKind::cpu;
}

double TrainOptions::lr_at(int64_t t) const { return warmup > 0 ? lr * std::min(1.0, double(t) / double(warmup)) : lr; }

}  // namespace ms
