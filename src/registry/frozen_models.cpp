#include "registry/frozen_models.h"

#include "core/check.h"
#include "core/log.h"
#include "registry/registry.h"
#include "t5/t5_model.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/t5_encoder.h"
#include "backend/cuda/vae_ops.h"
#endif

namespace ms {

T5Forward make_t5_forward(BackendKind kind, const T5Weights& w, bool automatic) {
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
#ifdef MEGASLIDE_HAVE_CUDA
  if (kind == BackendKind::cuda) {
    if (const std::string why = cuda::T5Encoder::refuses(w.config()); automatic && !why.empty()) {
      log_warn(why, "; encoding on the CPU instead");
      return t5_encode;
    }
    auto gpu = std::make_shared<cuda::T5Encoder>(w);
    return [gpu](const T5Weights& weights, const std::vector<int64_t>& ids) { return gpu->encode(weights, ids); };
  }
#endif
  (void)w, (void)automatic;
  return t5_encode;
}

std::unique_ptr<VaeOps> make_vae_ops(BackendKind kind, const VaeWeights& w) {
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
#ifdef MEGASLIDE_HAVE_CUDA
  if (kind == BackendKind::cuda) return cuda::vae_ops(w);
#endif
  return cpu_vae_ops(w);
}

}  // namespace ms
