#include "cli/commands.h"
#include "core/check.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/device.h"
#endif

namespace ms::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend, "Compute backend: cpu, cuda or auto (cuda when a usable GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_val("auto");
}

// The model's stages do not run on the GPU yet (issue 5): auto stays on the CPU, and cuda says what a GPU
// build can do today.
std::string resolve_backend(const std::string& requested) {
  if (requested != "cuda") return "cpu";
#ifdef MEGASLIDE_HAVE_CUDA
  if (const std::string why = cuda::unusable_reason(); !why.empty())
    MS_FAIL("--backend cuda: no usable CUDA GPU on this machine (", why, "); use --backend cpu");
  MS_FAIL(
      "--backend cuda: this build's CUDA backend runs `megaslide bench cuda` and the CUDA op tests, but the "
      "model's stages do not run on the GPU yet; use --backend cpu");
#else
  MS_FAIL(
      "--backend cuda: this build of megaslide has no CUDA backend (configure with nvcc on the PATH, or "
      "-DMEGASLIDE_CUDA=ON); use --backend cpu");
#endif
}

}  // namespace ms::cli
