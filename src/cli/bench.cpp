// `megaslide bench <what>`: throughput against a ceiling measured in the same run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/cpu/gemm.h"
#include "cli/ceilings.h"
#include "cli/commands.h"
#include "core/log.h"
#include "core/parallel.h"
#include "model/config.h"
#include "model/dims.h"
#include "model/flops.h"
#include "model/loader.h"
#include "train/trainer.h"

namespace ms::cli {
namespace {

struct BenchTrainArgs {
  int64_t steps = 6;
  std::string config;  // config.json for the tiny preset's sizes (configs/tiny-dsa.json: its attention type)
  TrainOptions shape = baseline_job();  // frames, height, width, batch_size: the baseline job's unless given
  bool json = false;
};

void bench_train(const BenchTrainArgs& a) {
  TrainOptions o = baseline_job();  // at the clip shape asked for
  o.frames = a.shape.frames, o.height = a.shape.height, o.width = a.shape.width, o.batch_size = a.shape.batch_size;
  o.steps = a.steps;
  o.config = a.config;
  o.save_every = 0;
  o.out = (std::filesystem::temp_directory_path() / ("megaslide-bench-" + std::to_string(::getpid()))).string();
  const double sgemm = measure_sgemm_rate(2048);
  TrainSummary s;
  {
    LogLevel quiet = LogLevel::warn;
    set_log_level(quiet);
    s = train(o);
    set_log_level(LogLevel::info);
  }
  std::filesystem::remove_all(o.out);
  const ModelConfig c = resolve_model(o.model, o.config).config;
  const ModelDims d = ModelDims::make(c, o.batch_size, o.frames, o.height, o.width, c.text_len);
  const Flops f = s.recomputed ? train_step_flops(c, d) : model_step_flops(c, d);  // what was executed
  const double achieved = s.tokens_per_second / double(d.N()) * f.total();
  nlohmann::json r{{"model", o.model},
                   {"config", o.config},
                   {"attention", name_of(c.attention.type)},
                   {"tokens_per_step", d.N()},
                   {"recomputed", s.recomputed},
                   {"steps", s.steps_run},
                   {"threads", num_threads()},
                   {"tokens_per_second", s.tokens_per_second},
                   {"step_flops", f.total()},
                   {"step_flops_attention", f.attention},
                   {"achieved_flops_per_second", achieved},
                   {"sgemm_flops_per_second", sgemm},
                   {"sgemm_kernels", cpu::openblas_coretype()},
                   {"fraction_of_sgemm", achieved / sgemm}};
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return;
  }
  std::printf("bench train: %s (%s, %s attention, %lld tokens/step, %d threads, %lld steps)\n",
              o.config.empty() ? "baseline job" : o.config.c_str(), o.model.c_str(), name_of(c.attention.type),
              static_cast<long long>(d.N()), num_threads(), static_cast<long long>(s.steps_run));
  std::printf("  tokens/s            %10.0f\n", s.tokens_per_second);
  std::printf("  achieved GFLOP/s    %10.2f  (%.2f GFLOP/step executed, %.0f%% attention; blocks %s)\n", achieved / 1e9,
              f.total() / 1e9, 100 * f.attention / f.total(),
              s.recomputed ? "recomputed in the backward" : "not recomputed: activations kept");
  std::printf("  sgemm GFLOP/s       %10.2f  (2048^3, same run; OpenBLAS %s kernels)\n", sgemm / 1e9,
              cpu::openblas_coretype());
  std::printf("  fraction of sgemm   %10.3f\n", achieved / sgemm);
}

}  // namespace

void add_bench_train(CLI::App& bench) {
  auto a = std::make_shared<BenchTrainArgs>();
  CLI::App* cmd =
      bench.add_subcommand("train", "Tokens/s of the baseline training job (the tiny preset) against the sgemm rate");
  cmd->add_option("--steps", a->steps, "Training steps to time")->capture_default_str();
  cmd->add_option("--config", a->config,
                  "config.json for the job's model (configs/tiny-dsa.json: the tiny model with DSA attention)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--frames", a->shape.frames, "Frames per clip (synthetic shapes)")->capture_default_str();
  cmd->add_option("--height", a->shape.height, "Frame height")->capture_default_str();
  cmd->add_option("--width", a->shape.width, "Frame width")->capture_default_str();
  cmd->add_option("--batch-size", a->shape.batch_size, "Clips per step")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_train(*a); });
}

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: ratios against ceilings measured in the same run");
  bench->require_subcommand(1);
  add_bench_train(bench[0]);
  add_bench_adamw(bench[0]);
  add_bench_attention(bench[0]);
  add_bench_data(bench[0]);
  add_bench_vae(bench[0]);
  add_bench_t5(bench[0]);
  add_bench_stream(bench[0]);
  add_bench_cuda(bench[0]);
}

}  // namespace ms::cli
