#include "cli/commands.h"
#include "core/check.h"
#include "core/memory_usage.h"
#include "registry/registry.h"

namespace ms::cli {

void add_backend_option(CLI::App& cmd, BackendChoice& backend, const std::string& gpu_path) {
  cmd.add_option_function<std::string>(
         "--backend", [&backend](const std::string& v) { backend = parse_name<BackendChoice>(v, "--backend"); },
         "Compute backend: " + choices_of<BackendChoice>() + " (" +
             (gpu_path.empty() ? "this verb runs on the CPU: auto and cpu run it there" : gpu_path) + ")")
      ->default_str(name_of(BackendChoice::automatic));
}

void add_host_memory_option(CLI::App& cmd, int64_t& bytes) {
  cmd.add_option_function<std::string>(
         "--host-memory", [&bytes](const std::string& v) { bytes = parse_host_memory(v); },
         "Host memory this verb may use, e.g. 20GB (absent: what this process can get: MemAvailable, the memory "
         "cgroup's limit, ulimit -v); checked before the model is allocated")
      ->type_name("BYTES");
}

// The verbs that run on the CPU only (forward, op): auto stays on the CPU, and cuda says why not.
BackendKind resolve_backend(BackendChoice requested) {
  if (requested != BackendChoice::cuda) return BackendKind::cpu;
  if (const std::string why = backend_unavailable(BackendKind::cuda); !why.empty())
    MS_FAIL("--backend cuda: ", why, "; leave --backend out to run on the CPU");
  MS_FAIL(
      "--backend cuda: on the GPU this build runs `train --offload stream`, `sample`, the frozen models' verbs "
      "(`text-encode`, `vae`, `cache`), `bench cuda` and the CUDA tests; this verb runs on the CPU: use --backend cpu");
}

BackendKind resolve_gpu_backend(BackendChoice requested) {
  if (requested == BackendChoice::cpu) return BackendKind::cpu;
  const std::string why = backend_unavailable(BackendKind::cuda);
  if (why.empty()) return BackendKind::cuda;
  if (requested == BackendChoice::cuda) MS_FAIL("--backend cuda: ", why, "; leave --backend out to run on the CPU");
  return BackendKind::cpu;
}

}  // namespace ms::cli
