// `megaslide bench data`: loading one musubi-tuner Wan cache item (bf16 latents and a bf16 text embedding, the
// files wan_cache_latents.py and wan_cache_text_encoder_outputs.py write) through the training data path, against
// a memcpy of the f32 values it produces (the ceiling of a loader that only converts), measured in the same run; and
// against the least time a training step at that shape can take on a GPU (the planner's h200 profile at its peak
// GEMM rate, Wan2.1-14B with dense attention and block recomputation): the share of a step the loading is when it
// is not hidden behind the step (the trainer prepares the next batch while a step computes).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/ceilings.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/flops.h"
#include "plan/hardware.h"

namespace ms::cli {
namespace {

namespace fs = std::filesystem;

struct BenchDataArgs {
  std::vector<int64_t> latents{21, 60, 104};  // F, H, W: 81 frames of 480 x 832
  int64_t text_rows = 512;                    // Wan's text_len, the longest embedding
  int reps = 20;
  std::string dir;  // where the cache's folder is made ("": the system temp dir)
  bool json = false;
};

// `n` bf16 values of a unit normal.
std::vector<uint16_t> bf16_normal(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = f32_to_bf16(float(r.normal()));
  return v;
}

void bench_data(const BenchDataArgs& a) {
  const int64_t F = a.latents[0], H = a.latents[1], W = a.latents[2], C = 16, D = 4096;
  const fs::path dir =  // a folder of its own, removed at the end
      (a.dir.empty() ? fs::temp_directory_path() : fs::path(a.dir)) / cat("megaslide-bench-data-", ::getpid());
  fs::create_directories(dir / "cache");
  const auto lat = bf16_normal(C * F * H * W, 1), txt = bf16_normal(a.text_rows * D, 2);
  write_safetensors((dir / "cache" / "clip_00000-081_0832x0480_wan.safetensors").string(),
                    {{cat("latents_", F, "x", H, "x", W, "_bfloat16"), DType::bf16, {C, F, H, W}, lat.data()}},
                    {{"architecture", "wan"},
                     {"width", "832"},
                     {"height", "480"},
                     {"format_version", "1.0.1"},
                     {"frame_count", "81"}});
  write_safetensors((dir / "cache" / "clip_wan_te.safetensors").string(),
                    {{"varlen_t5_bfloat16", DType::bf16, {a.text_rows, D}, txt.data()}},
                    {{"architecture", "wan"}, {"caption1", "a clip"}, {"format_version", "1.0.1"}});
  std::ofstream(dir / "data.toml") << "[[datasets]]\ncache_directory = \"cache\"\n";
  DataOptions o;
  o.source = (dir / "data.toml").string();
  o.in_dim = C, o.text_len = 512, o.text_dim = D;
  std::unique_ptr<Dataset> data = open_dataset(o);
  data->get(0);  // the files in the page cache, as they are after the first epoch
  double load = 1e30;
  int64_t produced = 0;
  for (int r = 0; r < a.reps; ++r) {
    DataSample s;
    load = std::min(load, wall_seconds([&] { s = data->get(r); }));
    produced = int64_t(s.x0.size() + s.context.size()) * 4;
  }
  std::vector<float> src(size_t(produced / 4), 1.0f), dst(src.size());
  double copy = 1e30;
  for (int r = 0; r < a.reps; ++r) {
    src[size_t(r)] = float(r);  // a new value each time
    copy = std::min(copy, wall_seconds([&] { std::memcpy(dst.data(), src.data(), size_t(produced)); }));
  }
  fs::remove_all(dir);
  const ModelConfig wan = preset_config("wan2.1-14b");
  const double step_flops = train_step_flops(wan, ModelDims::make(wan, 1, F, H, W, a.text_rows)).total();
  const double step_floor = step_flops / hardware_profile("h200").flops_per_s;
  const nlohmann::json j{{"latents", {C, F, H, W}},
                         {"text_rows", a.text_rows},
                         {"load_seconds", load},
                         {"memcpy_seconds", copy},
                         {"fraction_of_ceiling", copy / load},
                         {"h200_step_floor_seconds", step_floor},
                         {"fraction_of_step", load / step_floor}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("load one cache item (latents [%lld, %lld, %lld, %lld] bf16, text [%lld, %lld] bf16): %.2f ms\n",
              (long long)C, (long long)F, (long long)H, (long long)W, (long long)a.text_rows, (long long)D, load * 1e3);
  std::printf("memcpy of the %.1f MB of f32 it produces: %.2f ms; fraction_of_ceiling %.3f\n", produced / 1e6,
              copy * 1e3, copy / load);
  std::printf("Wan2.1-14B step at this shape on an H200 at peak bf16 GEMM rate: >= %.2f s; loading is %.3f%% of it\n",
              step_floor, 100 * load / step_floor);
}

}  // namespace

void add_bench_data(CLI::App& bench) {
  auto a = std::make_shared<BenchDataArgs>();
  CLI::App* cmd =
      bench.add_subcommand("data", "Loading one musubi-tuner cache item against memcpy and a training step");
  cmd->add_option("--latents", a->latents, "Latent extents F H W")->expected(3)->capture_default_str();
  cmd->add_option("--text-rows", a->text_rows, "Rows of the text embedding")->capture_default_str();
  cmd->add_option("--reps", a->reps, "Timed loads (the fastest is reported)")->capture_default_str();
  cmd->add_option("--dir", a->dir, "Where to make the cache's folder, removed after (default: the temp dir)");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_data(*a); });
}

}  // namespace ms::cli
