#include "registry/registry.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_stage_runner.h"
#include "core/check.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_stage_runner.h"
#include "backend/cuda/device.h"
#include "backend/cuda/nccl.h"
#endif

namespace ms {

std::string backend_unavailable(BackendKind kind) {
  if (kind == BackendKind::cpu) return "";
#ifdef MEGASLIDE_HAVE_CUDA
  if (std::string why = cuda::unusable_reason(); !why.empty())
    return cat("no usable CUDA GPU on this machine (", why, ")");
  return "";
#else
  return "this build of megaslide has no CUDA backend (configure with nvcc on the PATH, or -DMEGASLIDE_CUDA=ON)";
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, double link_gbps, Trace* trace) {
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
  if (kind == BackendKind::cpu) return std::make_unique<CpuBackend>(link_gbps, trace);
  if (link_gbps > 0) MS_FAIL("--link-gbps emulates a host link on the CPU backend; a GPU has a real one: leave it out");
#ifdef MEGASLIDE_HAVE_CUDA
  return std::make_unique<CudaBackend>(trace);
#else
  MS_FAIL("unreachable: backend ", kind);
#endif
}

std::unique_ptr<DeviceCollectives> connect_rank_devices(BackendKind kind, Communicator& comm, double timeout_s) {
  if (kind == BackendKind::cpu) return nullptr;
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
#ifdef MEGASLIDE_HAVE_CUDA
  // A rank that sees one GPU takes it (a launcher may give each rank its own through CUDA_VISIBLE_DEVICES; NCCL
  // refuses two ranks on one GPU); one that sees several takes its local rank's.
  const int gpus = cuda::device_count();
  if (gpus > 1 && comm.local_rank() >= gpus)
    MS_FAIL(comm.local_size(), " ranks run on this machine but it has ", gpus,
            " CUDA GPUs (CUDA_VISIBLE_DEVICES): each rank drives a GPU of its own; start at most ", gpus,
            " ranks per machine (mpirun's --npernode), or give each rank its GPU through CUDA_VISIBLE_DEVICES");
  cuda::select_device(gpus == 1 ? 0 : comm.local_rank());
  return std::make_unique<cuda::NcclCollectives>(cuda::load_nccl(), comm, timeout_s);
#else
  (void)comm, (void)timeout_s;
  MS_FAIL("unreachable: backend ", kind);
#endif
}

std::unique_ptr<StageRunner> make_stage_runner(const Backend& backend, const ModelConfig& c, const StepShapes& shapes) {
  if (backend.kind() == BackendKind::cpu) return std::make_unique<CpuStageRunner>(c, shapes);
#ifdef MEGASLIDE_HAVE_CUDA
  if (backend.kind() == BackendKind::cuda) return std::make_unique<cuda::CudaStageRunner>(c, shapes);
#endif
  MS_FAIL("the streamed model has no stage runner for the '", backend.kind(), "' backend in this build");
}

DevicePlan backend_arena(BackendKind kind, const ModelConfig& c, const StepShapes& shapes, const StreamOptions& o) {
  if (kind == BackendKind::cpu) return streamed_arena(c, shapes, kCpuComputeBytes, kCpuComputeBytes, o);
#ifdef MEGASLIDE_HAVE_CUDA
  if (kind == BackendKind::cuda) return streamed_arena(c, shapes, cuda::kComputeBytes, cuda::kComputeBytes, o);
#endif
  MS_FAIL("no '", kind, "' backend in this build");
}

std::string stage_runner_refuses(BackendKind backend, const ModelConfig& c) {
#ifdef MEGASLIDE_HAVE_CUDA
  if (backend == BackendKind::cuda) return cuda::CudaStageRunner::refuses(c);
#endif
  (void)backend, (void)c;
  return "";
}

}  // namespace ms
