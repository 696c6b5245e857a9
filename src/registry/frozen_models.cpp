#include "registry/frozen_models.h"

#include "backend/cpu/t5_encoder.h"
#include "backend/cpu/vae_ops.h"
#include "core/check.h"
#include "core/log.h"
#include "registry/registry.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/t5_encoder.h"
#include "backend/cuda/vae_ops.h"
#endif

namespace ms {

std::unique_ptr<T5Forward> make_t5_forward(BackendKind kind, const T5Weights& w, bool automatic) {
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
#ifdef MEGASLIDE_HAVE_CUDA
  if (kind == BackendKind::cuda) {
    if (const std::string why = cuda::T5Encoder::refuses(w.config()); automatic && !why.empty()) {
      log_warn(why, "; encoding on the CPU instead");
      return cpu_t5_forward();
    }
    return std::make_unique<cuda::T5Encoder>(w);
  }
#endif
  (void)w, (void)automatic;
  return cpu_t5_forward();
}

std::unique_ptr<VaeOps> make_vae_ops(BackendKind kind, const VaeWeights& w) {
  if (const std::string why = backend_unavailable(kind); !why.empty()) MS_FAIL("--backend ", kind, ": ", why);
#ifdef MEGASLIDE_HAVE_CUDA
  if (kind == BackendKind::cuda) return cuda::vae_ops(w);
#endif
  return cpu_vae_ops(w);
}

}  // namespace ms
