// `megaslide plan`: exact parameter counts, the paper's accounting, the device arena against what the resident
// runner allocates, bad input, and the JSON the verb prints.
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/resident_model.h"
#include "cli_util.h"
#include "core/check.h"
#include "core/units.h"
#include "model/workspace.h"
#include "plan/plan.h"
#include "plan/report.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train/option_table.h"

namespace ms::test {
namespace {

PlanInputs paper_105b() {  // 256 frames of 1080p with per-frame latents on one H200 with 1.5 TB
  PlanInputs in;
  in.model = preset_config("megaslide-105b");
  in.video = {1, 256, 1080, 1920, {1, 8, 8}};
  in.hw = hardware_profile("h200");
  return in;
}

TEST(Plan, PresetParameterCounts) {
  EXPECT_EQ(ParamTable(preset_config("wan2.1-14b")).total(), 14'288'491'584);
  const std::pair<const char*, double> scale_points[] = {
      {"megaslide-28b", 28.4e9}, {"megaslide-33b", 33.3e9}, {"megaslide-105b", 105e9}};
  for (const auto& [name, target] : scale_points) {
    const ModelConfig c = preset_config(name);
    EXPECT_EQ(c.head_dim(), 128) << name;
    EXPECT_NEAR(double(ParamTable(c).total()) / target, 1.0, 0.01) << name;
  }
  // The paper's 105 B counts DSA's offset networks: 14 bytes per parameter are its 1.47 TB of host state.
  const ModelConfig c = preset_config("megaslide-105b");
  EXPECT_TRUE(c.attention.has_offsets());
  EXPECT_NEAR(double(ParamTable(c).total()) / 105e9, 1.0, 0.001);
  EXPECT_NEAR(14.0 * double(ParamTable(c).total()) / 1.47e12, 1.0, 0.001);
}

TEST(Plan, PaperAccountingFor105B) {
  const Plan p = make_plan(paper_105b());
  EXPECT_NEAR(double(p.host.persistent()) / 1.47e12, 1.0, 0.01);  // 14 bytes per parameter
  EXPECT_EQ(p.host.persistent(), 14 * p.params);
  EXPECT_NEAR(double(p.host.exp_avg + p.host.exp_avg_sq) / 840e9, 1.0, 0.01);
  EXPECT_GT(p.latent.dims.N(), 2'000'000);
  EXPECT_EQ(p.latent.height, 1088);  // 1080 / 8 = 135 latent rows, odd: padded for the 2x2 patch
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("height 1080 padded to 1088"), std::string::npos) << p.notes[0];
  // 1.47 TB + a full 0.42 TB fp32 gradient pool does not fit in 1.5 TB: the immediate schedule does.
  EXPECT_EQ(p.schedule, OptimizerSchedule::immediate);
  EXPECT_LE(p.host.total(), 1'500'000'000'000);
  // One [N, D] bf16 tensor alone is 43 GB: the activations cannot fit; the plan says so and what would.
  EXPECT_FALSE(p.fits);
  EXPECT_NE(p.suggestion.find("--frames"), std::string::npos) << p.suggestion;
}

TEST(Plan, DeferredScheduleWhenTheGradientPoolFits) {
  PlanInputs in = paper_105b();
  in.model = preset_config("wan2.1-14b");
  in.video = {1, 81, 480, 832, {4, 8, 8}};
  const Plan p = make_plan(in);
  EXPECT_EQ(p.schedule, OptimizerSchedule::deferred);
  EXPECT_EQ(p.host.grads, 4 * p.params);
  EXPECT_TRUE(p.fits) << p.reasons.size();
  EXPECT_EQ(p.latent.dims.L, 21 * 30 * 52);  // Wan's 81x480x832 -> 21x60x104 latents -> 32760 tokens
}

TEST(Plan, StreamedArenaAndOffloadedCheckpoints) {
  const ModelConfig c = preset_config("wan2.1-1.3b");
  const ModelDims d = ModelDims::make(c, 1, 5, 30, 52, c.text_len);
  const int64_t ND = d.N() * c.dim;
  ArenaOptions o;
  o.prefetch = 3;
  const DevicePlan on = plan_device(c, d, o);
  EXPECT_EQ(on.weight_slots, 3 * ParamTable(c).max_stage_numel() * 2);
  EXPECT_EQ(on.grad_slots, 2 * ParamTable(c).max_stage_numel() * 4);
  EXPECT_EQ(on.checkpoints, (c.num_layers + 1) * ND * 2);
  o.offload_activations = true;
  const DevicePlan off = plan_device(c, d, o);
  EXPECT_EQ(off.checkpoints, 3 * ND * 2);
  EXPECT_EQ(off.checkpoints_host, (c.num_layers - 2) * ND * 2);  // the last three stay in their slots
  EXPECT_EQ(off.peak(), on.peak() - on.checkpoints + off.checkpoints);
}

// The GPU layout (act_bytes 2) is the CUDA stage runner's, buffer by buffer: bf16 activations, fp32 statistics and
// time path, no normalised copies, the reduction scratch, every buffer rounded up to 256 bytes (on a small odd
// config, where no size is a multiple of 256 by chance), and the fp32 inputs.
TEST(Plan, GpuArenaIsTheCudaLayoutBufferByBuffer) {
  ModelConfig c = preset_config("tiny");
  c.dim = 40;
  c.ffn_dim = 97;
  c.num_heads = 4;
  c.text_dim = 11;
  c.validate();
  const ModelDims d = ModelDims::make(c, 1, 3, 10, 6, c.text_len);
  ArenaOptions o;  // act_bytes 2, weight_bytes 2
  o.prefetch = 3;
  const DevicePlan p = plan_device(c, d, o);
  const int64_t stage = ParamTable(c).max_stage_numel();
  auto up = [](int64_t b) { return (b + 255) / 256 * 256; };
  ASSERT_NE(stage * 2 % 256, 0);
  EXPECT_EQ(p.weight_slots, 3 * up(stage * 2));
  EXPECT_EQ(p.grad_slots, 2 * up(stage * 4));
  const WorkspaceLayout l = o.layout(c, d);
  EXPECT_TRUE(l.fused_norm);
  EXPECT_GE(l.reduction_scratch, d.N() * c.dim / 64);
  const int64_t workspace = workspace_bytes<ModelWorkspace<uint16_t, float>>(
      [&](auto& ws, auto&& f) { visit_model_workspace(c, d, ws, f, l); }, 256);
  EXPECT_EQ(p.workspace(), workspace);
  int64_t inputs = 0;
  for (int64_t n : input_buffers(c, d)) inputs += up(n * 4);
  EXPECT_EQ(p.inputs, inputs);
  EXPECT_EQ(p.peak(), p.weight_slots + p.grad_slots + workspace + inputs);
}

TEST(Plan, AttentionFlops) {
  PlanInputs in = paper_105b();
  in.video.frames = 64;
  auto attention = [&](const char* type) {
    in.model.attention.type = parse_name<AttentionType>(type, "test");
    const Flops f = make_plan(in).flops;
    EXPECT_EQ(f.dsa == 0, in.model.attention.type == AttentionType::dense) << type;  // DSA's kernels' own family
    return f.attention + f.dsa;
  };
  const double dense = attention("dense"), dsa = attention("dsa"), fixed = attention("dsa_fixed");
  EXPECT_GT(dense, 100 * dsa);  // 522k keys per query against 27 slots
  // dsa adds 7 more trilinear corners per slot to scores and values, and its depthwise offset conv; per step
  // every block's forward runs twice and its backward costs two forwards.
  const double N = 64 * 68 * 120, D = 10240, blocks_x4 = 74 * 4;
  EXPECT_NEAR(dsa - fixed, blocks_x4 * (7 * 4 * N * 27 * D + 2 * N * D * 27), 1e-9 * dsa);
}

// The compute bound is each kernel family's work at its rate: GEMM, flash-type attention (self and cross), DSA's
// sampling and offset conv, and the memory-bound passes' bytes (25 [N, dim] and 2 [N, ffn_dim] reads or writes per
// block forward, 4 forwards' worth a step with the recompute).
TEST(Plan, ComputeBoundSumsTheKernelFamiliesAtTheirRates) {
  PlanInputs in = paper_105b();
  in.video.frames = 17;
  for (const char* type : {"dense", "dsa"}) {
    in.model.attention.type = parse_name<AttentionType>(type, "test");
    const Plan p = make_plan(in);
    const ModelConfig& c = in.model;
    const double N = double(p.latent.dims.N());
    EXPECT_DOUBLE_EQ(p.memory_bytes, 4 * N * double(25 * c.dim + 2 * c.ffn_dim) * 2 * double(c.num_layers));
    const KernelRates r = default_kernel_rates(in.hw);
    EXPECT_DOUBLE_EQ(r.gemm.per_s, 0.7 * 989e12);
    EXPECT_DOUBLE_EQ(r.memory.per_s, 0.8 * 4.8e12);
    const double want = p.flops.gemm / r.gemm.per_s + p.flops.attention / r.attention.per_s +
                        p.flops.dsa / r.dsa.per_s + p.memory_bytes / r.memory.per_s;
    EXPECT_NEAR(p.bounds.compute, want, 1e-12 * want) << type;
    EXPECT_GT(p.flops.attention, 0) << type;  // cross-attention runs the flash kernels under DSA too
    // MFU stays model FLOPs over the step at the datasheet peak, not at the kernel rates.
    EXPECT_NEAR(p.mfu, p.model_flops.total() / (p.step_s * 989e12), 1e-12);
  }
}

// `plan --rates FILE`: the families `bench cuda --json` measured replace the defaults, the rest stay; GEMM is the
// model shapes' FLOP-weighted rate (their total FLOPs over their total time), attention and DSA the rows with the most
// tokens, the memory-bound passes the device copy.
TEST(Plan, RatesFileReplacesTheMeasuredFamilies) {
  TempDir dir;
  const std::string file = (dir.path / "bench.jsonl").string();
  std::ofstream(file) << R"({"device":"NVIDIA H100 80GB HBM3","measure":"device"}
{"gbps":2900.5,"measure":"copy","what":"device_copy_gbps"}
{"gbps":51.0,"measure":"copy","what":"pinned_h2d_gbps"}
{"K":8192,"M":8192,"N":8192,"measure":"gemm","shape":"square 8192","tflops":700.0}
{"K":5120,"M":32760,"N":5120,"measure":"gemm","shape":"Wan-14B q/k/v/o, 32760 tokens","tflops":600.0}
{"K":5120,"M":32760,"N":13824,"measure":"gemm","shape":"Wan-14B ffn.0, 32760 tokens","tflops":650.0}
{"K":4096,"M":4096,"N":4096,"measure":"gemm","shape":"fp32 square 4096","tflops":50.0}
{"measure":"attention","type":"dsa","tokens":4096,"forward_tflops":1.0,"step_tflops":1.5}

{"measure":"attention","type":"dense","tokens":32768,"forward_tflops":300.0,"step_tflops":250.0}
{"measure":"attention","type":"dense","tokens":4096,"forward_tflops":200.0,"step_tflops":150.0}
{"measure":"attention","type":"window","tokens":32768,"forward_tflops":90.0,"step_tflops":80.0}
{"measure":"done"}
)";
  const HardwareProfile hw = hardware_profile("h100-sxm");
  const KernelRates d = default_kernel_rates(hw), r = read_kernel_rates(file, d);
  const double f1 = 2.0 * 32760 * 5120 * 5120, f2 = 2.0 * 32760 * 13824 * 5120;
  EXPECT_NEAR(r.gemm.per_s, (f1 + f2) / (f1 / 600e12 + f2 / 650e12), 1e-3);
  EXPECT_DOUBLE_EQ(r.attention.per_s, 250e12);
  EXPECT_DOUBLE_EQ(r.dsa.per_s, 1.5e12);
  EXPECT_DOUBLE_EQ(r.memory.per_s, 2900.5e9);
  for (const KernelRate* k : {&r.gemm, &r.attention, &r.dsa, &r.memory})
    EXPECT_NE(k->source.find("measured: " + file + " (bench cuda on NVIDIA H100 80GB HBM3)"), std::string::npos)
        << k->source;
  // Only a GEMM measured: the other families keep their defaults; the square GEMM stands in for the model's shapes.
  std::ofstream(file) << R"({"K":8192,"M":8192,"N":8192,"measure":"gemm","shape":"square 8192","tflops":700.0})"
                      << "\n";
  const KernelRates g = read_kernel_rates(file, d);
  EXPECT_DOUBLE_EQ(g.gemm.per_s, 700e12);
  EXPECT_DOUBLE_EQ(g.attention.per_s, d.attention.per_s);
  EXPECT_EQ(g.dsa.source, d.dsa.source);
  // The verb prints which it used, on a line of its own.
  const CliResult cli = run_cli("plan --preset wan2.1-14b --gpu h100-sxm --rates '" + file + "'");
  ASSERT_EQ(cli.code, 0) << cli.output;
  EXPECT_NE(cli.output.find("\nkernel rates  GEMM 700 TFLOP/s (measured: "), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("attention 247 TFLOP/s (assumed"), std::string::npos) << cli.output;
}

TEST(Plan, BadRatesFilesAreClearErrors) {
  TempDir dir;
  const std::string file = (dir.path / "bench.jsonl").string();
  const KernelRates d = default_kernel_rates(hardware_profile("h200"));
  auto error = [&](const std::string& text) {
    std::ofstream(file) << text;
    try {
      read_kernel_rates(file, d);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("{\"measure\":\"device\",\"device\":\"x\"}\nnot json\n").find("line 2 is not a JSON object"),
            std::string::npos);
  EXPECT_NE(error("{\"measure\":\"gemm\",\"shape\":\"square 8192\"}\n").find("line 1 (gemm)"), std::string::npos);
  EXPECT_NE(error("{\"measure\":\"device\",\"device\":\"x\"}\n").find("no GEMM, attention or copy measurement"),
            std::string::npos);
  EXPECT_NE(error("{\"measure\":\"gemm\",\"shape\":\"a\",\"M\":1,\"N\":1,\"K\":1,\"tflops\":0}\n").find("GEMM rate"),
            std::string::npos);
  const CliResult cli = run_cli("plan --preset tiny --rates /nonexistent/bench.jsonl");
  EXPECT_EQ(cli.code, 1) << cli.output;
  EXPECT_NE(cli.output.find("megaslide: error: plan --rates: cannot read '/nonexistent/bench.jsonl'"),
            std::string::npos)
      << cli.output;
}

// The device accounting of the resident schedule (--offload none on the CPU backend: f32 weights, gradients in the
// host pool) equals what ResidentModel allocates, which is what the trainer reports as device_peak_bytes.
TEST(Plan, ResidentArenaMatchesTheResidentRunner) {
  struct Case {
    ModelConfig c;
    int64_t B, F, H, W;
  };
  std::vector<Case> cases;
  ModelConfig c = preset_config("tiny");
  cases.push_back({c, 2, 6, 24, 24});
  cases.push_back({c, 1, 3, 8, 12});
  c.attention.type = AttentionType::dsa;
  cases.push_back({c, 1, 4, 6, 8});
  c.attention.type = AttentionType::window;
  c.num_layers = 5;
  cases.push_back({c, 3, 2, 4, 4});
  c = preset_config("tiny");
  c.patch_size = {2, 2, 2};
  c.in_dim = c.out_dim = 5;
  c.attention.type = AttentionType::dsa_fixed;
  cases.push_back({c, 1, 4, 8, 6});
  ArenaOptions o;
  o.resident = true;
  o.weight_bytes = o.act_bytes = 4;
  o.grad_slots = 0;
  for (const auto& k : cases) {
    const ModelDims d = ModelDims::make(k.c, k.B, k.F, k.H, k.W, k.c.text_len);
    const ResidentModel<float> m(k.c, d);
    const int64_t measured = m.workspace_bytes() + 4 * m.table().total();
    const DevicePlan p = plan_device(k.c, d, o);
    EXPECT_EQ(p.peak() - p.inputs, measured) << k.c.attention.type;
    EXPECT_NEAR(double(p.peak()) / double(measured), 1.0, 0.10);
  }
}

TEST(Plan, ByteSizes) {
  EXPECT_EQ(parse_bytes("16MiB", "x"), 16 << 20);
  EXPECT_EQ(parse_bytes("80GiB", "x"), 80LL << 30);
  EXPECT_EQ(parse_bytes("1.5TB", "x"), 1'500'000'000'000);
  EXPECT_EQ(parse_bytes("141gb", "x"), 141'000'000'000);
  EXPECT_EQ(parse_bytes("4096", "x"), 4096);
  for (const char* bad : {"", "GB", "-5GB", "12XB", "1.2.3GB", "abc"})
    EXPECT_THROW(parse_bytes(bad, "--device-memory"), Error) << bad;
  EXPECT_EQ(format_bytes(1.468e12), "1.47 TB");
}

TEST(Plan, BadInputIsAClearError) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { preset_config("megaslide-7b"); }).find("megaslide-7b"), std::string::npos);
  EXPECT_NE(message([] { hardware_profile("a100"); }).find("a100"), std::string::npos);
  PlanInputs in = paper_105b();
  in.video.vae_stride = {4, 8, 8};
  EXPECT_NE(message([&] { make_plan(in); }).find("use 253 or 257"), std::string::npos);
  in = paper_105b();
  in.video.height = -4;
  EXPECT_NE(message([&] { make_plan(in); }).find("--height must be positive"), std::string::npos);
  in = paper_105b();
  in.arena.prefetch = 1;
  EXPECT_NE(message([&] { make_plan(in); }).find("--prefetch 1"), std::string::npos);
}

TEST(Plan, CliErrorsExitNonZero) {
  for (const char* args : {"--preset nope", "--preset tiny --gpu a100", "--preset tiny --frames 80",
                           "--preset tiny --device-memory 12XB", "--preset tiny --width -8", "--frames 81"}) {
    const CliResult r = run_cli(std::string("plan ") + args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_NE(r.output.find("megaslide: error:"), std::string::npos) << r.output;
  }
}

TEST(Plan, CliJsonHasTheIssueKeys) {
  const CliResult r =
      run_cli("plan --preset megaslide-105b --frames 256 --height 1080 --width 1920 --vae-stride 1,8,8 --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* k : {"param_count", "stage_params", "host_bytes", "tokens", "device_bytes", "h2d_bytes", "d2h_bytes",
                        "flops", "bounds", "predicted_step_s", "mfu", "fits", "reason", "suggestion", "schedule"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"weights", "master", "exp_avg", "exp_avg_sq", "grads", "total"})
    EXPECT_TRUE(j["host_bytes"].contains(k)) << k;
  for (const char* k : {"weight_slots", "grad_slots", "checkpoints", "attention", "other", "peak"})
    EXPECT_TRUE(j["device_bytes"].contains(k)) << k;
  EXPECT_TRUE(j["flops"].contains("gemm") && j["flops"].contains("attention"));
  EXPECT_EQ(j["param_count"].get<int64_t>(), ParamTable(preset_config("megaslide-105b")).total());
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_FALSE(j["reason"].get<std::string>().empty());
}

// A preset's own video size and VAE stride unless told otherwise (Wan's configs); the old names are aliases.
TEST(Plan, TakesThePresetsVideoDefaults) {
  auto video = [](const std::string& args) {
    const CliResult r = run_cli("plan " + args + " --json");
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    return r.code ? nlohmann::json() : nlohmann::json::parse(r.output)["video"];
  };
  const auto ti2v = video("--preset wan2.2-ti2v-5b");  // 121 frames at 704 x 1280, stride 4, 16, 16
  EXPECT_EQ(ti2v["frames"], 121);
  EXPECT_EQ(ti2v["latent"], nlohmann::json({31, 44, 80}));
  EXPECT_EQ(ti2v["token_grid"], nlohmann::json({31, 22, 40}));
  const auto a14b = video("--preset wan2.2-t2v-a14b");  // 81 frames at 720 x 1280, stride 4, 8, 8
  EXPECT_EQ(a14b["latent"], nlohmann::json({21, 90, 160}));
  const auto wan21 = video("--preset wan2.1-14b");  // 81 frames at 480 x 832
  EXPECT_EQ(wan21["latent"], nlohmann::json({21, 60, 104}));
  EXPECT_EQ(video("--preset wan2.1-t2v-14b"), wan21);
  const auto told = video("--preset wan2.2-ti2v-5b --frames 41 --height 480 --width 832 --vae-stride 4,8,8");
  EXPECT_EQ(told["latent"], nlohmann::json({11, 60, 104}));
}

// End to end: the plan of the default training job's shape against the device_peak_bytes its run reports.
// plan's resident arena against the trainer's measured one: recomputing each block (one block's activations), and
// keeping every block's (--recompute never: num_layers - 1 more), both given explicitly to both.
TEST(Plan, MatchesTheTrainersMeasuredPeak) {
  const std::string shape = "--frames 2 --height 8 --width 8 --batch-size 1";
  for (const std::string recompute : {"always", "never"}) {
    SCOPED_TRACE(recompute);
    TempDir dir;
    const CliResult t = run_cli("-q train --model tiny --steps 1 --save-every 0 --recompute " + recompute + " " +
                                shape + " --out " + dir.file("run"));
    ASSERT_EQ(t.code, 0) << t.output;
    std::ifstream metrics(dir.file("run/metrics.jsonl"));
    std::string line;
    ASSERT_TRUE(std::getline(metrics, line));
    const int64_t measured = nlohmann::json::parse(line)["device_peak_bytes"].get<int64_t>();
    const CliResult r = run_cli("plan --preset tiny --gpu cpu --offload none --vae-stride 1,1,1 --json --recompute " +
                                recompute + " " + shape);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto plan = nlohmann::json::parse(r.output);
    const auto dev = plan["device_bytes"];
    EXPECT_EQ(dev["peak"].get<int64_t>() - dev["inputs"].get<int64_t>(), measured);
    EXPECT_NEAR(double(dev["peak"].get<int64_t>()) / double(measured), 1.0, 0.10);
    EXPECT_EQ(plan["activations_kept"].get<bool>(), recompute == "never");
    EXPECT_EQ(dev["kept_acts"].get<int64_t>() > 0, recompute == "never");
  }
}

// --recompute auto keeps the activations of a resident run where it then fits, and its FLOPs are then 3 forwards a
// block (4 with the recompute); a budget that only fits the recompute design gets it; never on a streamed run is an
// error naming --offload none.
TEST(Plan, RecomputeAutoKeepsActivationsWhereTheyFit) {
  const std::string base =
      "plan --preset tiny --gpu cpu --offload none --vae-stride 1,1,1 --frames 2 --height 8 "
      "--width 8 --json --host-memory 64GB";
  auto plan_of = [&](const std::string& flags) {
    const CliResult r = run_cli(base + " " + flags);
    EXPECT_EQ(r.code, 0) << r.output;
    return nlohmann::json::parse(r.output);
  };
  const auto kept = plan_of(""), always = plan_of("--recompute always"), never = plan_of("--recompute never");
  EXPECT_TRUE(kept["activations_kept"].get<bool>());
  EXPECT_EQ(kept["device_bytes"]["peak"], never["device_bytes"]["peak"]);
  EXPECT_GT(kept["device_bytes"]["peak"].get<int64_t>(), always["device_bytes"]["peak"].get<int64_t>());
  const double f_kept = kept["flops"]["total"].get<double>(), f_always = always["flops"]["total"].get<double>();
  EXPECT_LT(f_kept, f_always);
  // A device budget between the two arenas: auto falls back to recomputing, and fits.
  const int64_t between =
      (kept["device_bytes"]["peak"].get<int64_t>() + always["device_bytes"]["peak"].get<int64_t>()) / 2;
  const auto tight = plan_of("--device-memory " + std::to_string(between));
  EXPECT_FALSE(tight["activations_kept"].get<bool>());
  EXPECT_TRUE(tight["fits"].get<bool>());
  const CliResult streamed = run_cli("plan --preset tiny --recompute never");
  EXPECT_NE(streamed.code, 0);
  EXPECT_NE(streamed.output.find("--offload none"), std::string::npos) << streamed.output;
}

}  // namespace
}  // namespace ms::test

namespace ms::test {
namespace {

// Wan2.1-14B at 81 x 480 x 832 on G GPUs of M machines (docs/distributed.md), against one GPU's plan: each GPU moves
// 1/R of the link traffic and all-gathers / reduce-scatters (R - 1) / R of it between GPUs, at NVLink's 450 GB/s
// within a machine and NDR's 50 GB/s across machines; a machine's host memory holds its G ranks' shards, the same
// 14 bytes per parameter in all when M = 1 and 1/M of them otherwise (up to the chunks' rounding).
TEST(Plan, DistributedShardsTheHostStateAndPricesTheCollectives) {
  PlanInputs in = paper_105b();
  in.model = preset_config("wan2.1-14b");
  in.video = {1, 81, 480, 832, {4, 8, 8}};
  in.schedule = OptimizerSchedule::deferred;
  const Plan one = make_plan(in);
  for (auto [G, M] : {std::pair{8, 1}, std::pair{8, 4}, std::pair{3, 1}}) {
    in.gpus_per_node = G, in.nodes = M;
    const Plan p = make_plan(in);
    const int R = G * M;
    EXPECT_EQ(p.ranks, R);
    EXPECT_NEAR(double(p.traffic.h2d_weights), double(one.traffic.h2d_weights) / R, 1);
    EXPECT_NEAR(double(p.traffic.d2h_grads), double(one.traffic.d2h_grads) / R, 1);
    EXPECT_NEAR(double(p.collectives.gather_bytes), double(one.traffic.h2d_weights) * (R - 1) / R, 1);
    EXPECT_NEAR(double(p.collectives.scatter_bytes), double(one.traffic.d2h_grads) * (R - 1) / R, 1);
    const double rate = M > 1 ? 50e9 : 450e9;
    EXPECT_DOUBLE_EQ(p.collectives.gather_s, double(p.collectives.gather_bytes) / rate);
    EXPECT_NEAR(double(p.host.persistent()), 14.0 * double(one.params) / R, 14.0 * 43);  // 43 stages' rounding
    EXPECT_NEAR(double(p.host_needed), double(one.host_needed) / M, double(one.host_needed) * 1e-6);
    EXPECT_EQ(p.flops.total(), one.flops.total());  // each GPU computes its own batch
    EXPECT_GE(p.bounds.link, std::max(p.collectives.gather_s, p.collectives.scatter_s));
  }
}

// The paper's 105 B model does not fit one machine of 256 GB with 8 GPUs; 8 such machines hold it, and the plan for
// one machine names the fewest that would.
TEST(Plan, The105BPresetFitsEightMachinesOf256GB) {
  PlanInputs in = paper_105b();
  in.video = {1, 81, 480, 832, {4, 8, 8}};
  in.host_budget = 256'000'000'000;
  in.gpus_per_node = 8;
  in.nodes = 8;
  const Plan eight = make_plan(in);
  EXPECT_TRUE(eight.fits) << (eight.reasons.empty() ? "" : eight.reasons[0]);
  EXPECT_LE(eight.host_needed, in.host_budget);
  in.nodes = 1;
  const Plan one = make_plan(in);
  EXPECT_FALSE(one.fits);
  ASSERT_EQ(one.suggestion.rfind("--nodes ", 0), 0u) << one.suggestion;
  const int nodes = std::stoi(one.suggestion.substr(8));
  in.nodes = nodes;
  EXPECT_TRUE(make_plan(in).fits) << nodes;
  in.nodes = nodes - 1;
  EXPECT_FALSE(make_plan(in).fits) << nodes - 1;
}

}  // namespace
}  // namespace ms::test

namespace ms::test {
namespace {

// plan's runtime flags are train's own (one option table): each is in both verbs' help with train's text, bad values
// get train's messages, and the host-link override has a name of its own (train's --link-gbps emulates a link).
TEST(Plan, TakesTrainsRuntimeFlagsFromItsOptionTable) {
  const CliResult plan_help = run_cli("plan --help"), train_help = run_cli("train --help");
  ASSERT_EQ(plan_help.code, 0) << plan_help.output;
  int shared = 0;
  for (const TrainOption& o : train_option_table())
    for (const char* flag : {"--offload", "--optimizer-schedule", "--recompute", "--prefetch", "--device-memory",
                             "--offload-activations", "--host-memory"})
      if (o.flag == flag) {
        ++shared;
        EXPECT_NE(plan_help.output.find(o.help), std::string::npos) << flag << "\n" << plan_help.output;
        EXPECT_NE(train_help.output.find(o.help), std::string::npos) << flag;
      }
  EXPECT_EQ(shared, 7);
  EXPECT_NE(plan_help.output.find("--offload {none,stream}=stream"), std::string::npos) << "plan's own default";
  const CliResult slots = run_cli("plan --preset tiny --prefetch 1"), train_slots = run_cli("train --prefetch 1");
  EXPECT_NE(slots.code, 0);
  EXPECT_NE(slots.output.find("--prefetch is below 2: one weight slot computes while another loads, got 1"),
            std::string::npos)
      << slots.output;
  EXPECT_NE(train_slots.output.find("--prefetch is below 2"), std::string::npos) << train_slots.output;
  const CliResult schedule = run_cli("plan --preset tiny --optimizer-schedule sometimes");
  EXPECT_NE(schedule.code, 0);
  EXPECT_NE(schedule.output.find("--optimizer-schedule"), std::string::npos) << schedule.output;
  EXPECT_NE(run_cli("plan --preset tiny --link-gbps 5").code, 0) << "train's emulated link is no plan flag";
  const CliResult link = run_cli("plan --preset wan2.1-14b --host-link-gbps 7 --json");
  ASSERT_EQ(link.code, 0) << link.output;
  EXPECT_EQ(nlohmann::json::parse(link.output)["hardware"]["link_bytes_per_s"].get<double>(), 7e9) << link.output;
}

}  // namespace
}  // namespace ms::test
