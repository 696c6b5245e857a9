#include "cli/commands.h"
#include "core/check.h"

namespace ms::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend, "Compute backend: cpu, cuda or auto (cuda when a usable GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_val("auto");
}

std::string resolve_backend(const std::string& requested) {
  if (requested == "cuda")
    MS_FAIL("--backend cuda: this build of megaslide has no CUDA backend; use --backend cpu");
  return "cpu";
}

}  // namespace ms::cli
