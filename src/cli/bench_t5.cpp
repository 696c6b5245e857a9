// `megaslide bench t5`: the umT5 encoder on the CPU at the real shape (random bfloat16 weights generated in memory,
// 11 GB for umT5-XXL, or a weights file): seconds per prompt of L tokens, achieved GFLOP/s against the sgemm rate
// measured in the same run, and peak memory. The PyTorch peer is bench/t5_torch.py (docs/benchmarks.md).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/t5_encoder.h"
#include "cli/ceilings.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/memory_usage.h"
#include "core/parallel.h"
#include "core/units.h"

namespace ms::cli {
namespace {

struct BenchT5Args {
  std::vector<int64_t> tokens{50};
  int64_t layers = 0;  // 0: the config's
  std::string t5, config;
  bool json = false;
};

void bench_t5(const BenchT5Args& a) {
  T5Config c = read_t5_config(a.config);
  if (a.layers < 0 || (a.layers > 0 && !a.t5.empty()))
    MS_FAIL("--layers takes a positive count, with random weights only");
  if (a.layers > 0) c.num_layers = a.layers;
  const double sgemm = measure_sgemm_rate(2048);
  std::unique_ptr<T5Weights> w;
  const double made = wall_seconds([&] {
    w = std::make_unique<T5Weights>(a.t5.empty() ? T5Weights::random(c, 7) : T5Weights::load(a.t5, a.config));
  });
  nlohmann::json j{{"threads", num_threads()},
                   {"params", t5_param_count(c)},
                   {"layers", c.num_layers},
                   {"weights", w->source()},
                   {"weights_seconds", made},
                   {"sgemm_gflops", sgemm / 1e9},
                   {"sgemm_kernels", cpu::openblas_coretype()},
                   {"prompts", nlohmann::json::array()}};
  if (!a.json)
    std::printf(
        "umT5 encoder (%s, %.2f B parameters, %lld layers of width %lld) ready in %.1f s; %d threads, sgemm "
        "2048^3 %.1f GFLOP/s (OpenBLAS %s kernels)\n",
        w->source().c_str(), double(t5_param_count(c)) / 1e9, (long long)c.num_layers, (long long)c.dim, made,
        num_threads(), sgemm / 1e9, cpu::openblas_coretype());
  for (int64_t L : a.tokens) {
    if (L < 1 || L > c.text_len) MS_FAIL("--tokens ", L, " must be in [1, text_len = ", c.text_len, "]");
    std::vector<int64_t> ids(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) ids[size_t(i)] = (i * 7919 + 13) % c.vocab;
    ids.back() = 1;      // EOS
    t5_encode(*w, ids);  // warm: the weights' pages and the panels' buffers
    double best = 1e30;
    for (int r = 0; r < 2; ++r) best = std::min(best, wall_seconds([&] { t5_encode(*w, ids); }));
    const double f = t5_encode_flops(c, L), bound = f / sgemm;
    j["prompts"].push_back({{"tokens", L},
                            {"seconds", best},
                            {"gflop", f / 1e9},
                            {"gflops", f / best / 1e9},
                            {"fraction_of_sgemm", bound / best},
                            {"seconds_at_sgemm", bound}});
    if (!a.json)
      std::printf("%4lld tokens: %7.2f s, %8.1f GFLOP, %6.1f GFLOP/s, %.3f of sgemm (%.2fx the sgemm-rate time)\n",
                  (long long)L, best, f / 1e9, f / best / 1e9, bound / best, best / bound);
  }
  j["peak_bytes"] = peak_resident_bytes();
  if (a.json)
    std::printf("%s\n", j.dump().c_str());
  else
    std::printf("peak memory %s\n", format_bytes(double(peak_resident_bytes())).c_str());
}

}  // namespace

void add_bench_t5(CLI::App& bench) {
  auto a = std::make_shared<BenchT5Args>();
  CLI::App* cmd = bench.add_subcommand("t5", "umT5 text encoder: seconds per prompt and GFLOP/s against sgemm");
  cmd->add_option("--tokens", a->tokens, "Prompt lengths in tokens (EOS included)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--layers", a->layers, "Layers of random weights (default: the config's, 24 for umT5-XXL: 11 GB)");
  cmd->add_option("--t5", a->t5, "Encoder weights (default: random bfloat16 weights of the config, in memory)");
  cmd->add_option("--t5-config", a->config, "Encoder config JSON (default: umT5-XXL)");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_t5(*a); });
}

}  // namespace ms::cli
