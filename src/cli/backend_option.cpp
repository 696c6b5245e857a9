#include "cli/commands.h"
#include "core/check.h"
#include "registry/registry.h"

namespace ms::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend, "Compute backend: cpu, cuda or auto (cuda when a usable GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_val("auto");
}

// The verbs other than train run on the CPU only (the model's stages run on the GPU in `train --offload stream`):
// auto stays on the CPU, and cuda says why not.
std::string resolve_backend(const std::string& requested) {
  if (requested != "cuda") return "cpu";
  if (const std::string why = backend_unavailable("cuda"); !why.empty())
    MS_FAIL("--backend cuda: ", why, "; use --backend cpu");
  MS_FAIL(
      "--backend cuda: on the GPU this build runs `megaslide train --offload stream`, `megaslide bench cuda` and "
      "the CUDA tests; this verb runs on the CPU: use --backend cpu");
}

}  // namespace ms::cli
