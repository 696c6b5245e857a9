#include "train/run_setup.h"

#include <string>
#include <vector>

#include "core/check.h"
#include "registry/registry.h"
#include "train/memory_fit.h"

namespace ms {

BackendKind resolve_backend(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c) {
  const RuntimeOptions& r = o.runtime;
  if (r.backend == BackendChoice::cpu) return BackendKind::cpu;
  const std::string why = [&]() -> std::string {  // what keeps this run off the GPU
    if (std::string gpu = backend_unavailable(BackendKind::cuda); !gpu.empty()) return gpu;
    if (r.offload != Offload::stream)
      return "the resident schedule (--offload none) runs on the CPU backend; add --offload stream";
    if (std::string kernels = stage_runner_refuses(BackendKind::cuda, c); !kernels.empty()) return kernels;
    if (r.link_gbps > 0) return "--link-gbps emulates a host link on the CPU backend";
    if (hooks.inject_nan_activation > 0)
      return "--inject-nan-activation poisons activations in host memory, on the CPU backend";
    return "";
  }();
  if (why.empty()) return BackendKind::cuda;
  if (r.backend == BackendChoice::cuda) MS_FAIL("--backend cuda: ", why, "; or use --backend cpu");
  return BackendKind::cpu;
}

RunSetup resolve_run(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c, const StepShapes& shapes,
                     bool resumed, Communicator& comm) {
  RunSetup r;
  r.ranks = comm.size();
  r.local_ranks = comm.local_size();
  r.backend = resolve_backend(o, hooks, c);
  fit_host_memory(o, r, c, shapes, resumed);
  if (comm.size() > 1) {  // every rank must take part in the same collectives (NCCL's only on GPU ranks)
    const double mine[] = {double(r.schedule), r.keep_block_acts ? 1.0 : 0.0, double(r.backend)};
    const char* what[] = {"--optimizer-schedule auto differently (their host memory differs); give it explicitly",
                          "--recompute auto differently (their host memory differs); give it explicitly",
                          "--backend auto differently (some have no usable GPU); pass --backend cpu, or run the ranks "
                          "on machines with GPUs only"};
    const std::vector<double> all = comm.gather(Channel::control, mine);
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] != mine[i % 3]) MS_FAIL("the ranks' machines resolve ", what[i % 3]);
  }
  return r;
}

}  // namespace ms
