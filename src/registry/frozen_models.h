// The frozen models of the pipeline, the VAE and the text encoder, on the backend a verb chose: their CPU forms, or
// the GPU's (backend/cuda/vae_ops.h, t5_encoder.h) in a CUDA build. Apart from registry.h, so that the layers that use
// only the backends (plan) do not see these models.
#pragma once
#include <memory>

#include "runtime/backend.h"
#include "runtime/t5_forward.h"
#include "runtime/vae_ops.h"

namespace ms {

// The text encoder's forward on backend `kind` (runtime/t5_forward.h): t5_encode on the CPU; on CUDA, w's layers are
// uploaded to the GPU here, once, and the forward is to be called with w. Where the GPU's free memory cannot hold
// them, `automatic` (the user left --backend at auto) falls back to the CPU with a warning that says why; otherwise
// that is an error naming --backend cpu. Throws ms::Error naming backend_unavailable (registry.h).
std::unique_ptr<T5Forward> make_t5_forward(BackendKind kind, const T5Weights& w, bool automatic);

// The VAE's ops on backend `kind` (runtime/vae_ops.h): host memory and the CPU kernels, or the GPU's with w's weights
// uploaded here, once. w must outlive them. Throws ms::Error naming backend_unavailable.
std::unique_ptr<VaeOps> make_vae_ops(BackendKind kind, const VaeWeights& w);

}  // namespace ms
