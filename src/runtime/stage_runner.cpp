#include "runtime/stage_runner.h"

#include <string>

#include "core/check.h"
#include "runtime/cpu_stage_runner.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/cuda_stage_runner.h"
#endif

namespace ms {

std::unique_ptr<StageRunner> make_stage_runner(const Backend& backend, const ModelConfig& c, const ModelDims& d) {
  const std::string name = backend.name();
  if (name == "cpu") return std::make_unique<CpuStageRunner>(c, d);
#ifdef MEGASLIDE_HAVE_CUDA
  if (name == "cuda") return std::make_unique<cuda::CudaStageRunner>(c, d);
#endif
  MS_FAIL("the streamed model has no stage runner for the '", name, "' backend in this build");
}

std::string stage_runner_refuses(const std::string& backend, const ModelConfig& c) {
#ifdef MEGASLIDE_HAVE_CUDA
  if (backend == "cuda") return cuda::CudaStageRunner::refuses(c);
#endif
  (void)backend, (void)c;
  return "";
}

}  // namespace ms
