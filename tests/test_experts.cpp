// Wan2.2 A14B's two experts: their folders in Wan's and diffusers' layouts, and `train --expert`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/dtype.h"
#include "model/export.h"
#include "model/init.h"
#include "model/loader.h"
#include "model/param_table.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

// An A14B-like folder of two tiny experts with different weights, in Wan's layout (high_noise_model/,
// low_noise_model/) or diffusers' (transformer/, transformer_2/, model_index.json with boundary_ratio 0.9).
struct ExpertFolder {
  ModelConfig config = preset_config("tiny");
  std::vector<float> high, low;  // bf16-exact weights of each expert

  std::vector<float> make(const std::string& dir, SaveFormat format, uint64_t seed) {
    const ParamTable table(config);
    std::vector<float> params(size_t(table.total()));
    init_params(table, config.dim, seed, params.data());
    for (float& p : params) p += 0.01f;  // the zero-initialised head is not zero
    std::vector<uint16_t> bf16(params.size());
    for (size_t i = 0; i < params.size(); ++i) bf16[i] = f32_to_bf16(params[i]), params[i] = bf16_to_f32(bf16[i]);
    std::vector<TensorRef> refs;
    for (const ParamInfo& p : table.params()) refs.push_back({p.name, DType::bf16, p.shape, bf16.data() + p.offset});
    fs::create_directories(dir);
    write_model_files(dir, format, config, refs);
    return params;
  }
  ExpertFolder(const std::string& root, SaveFormat format) {
    if (format == SaveFormat::wan) {
      high = make(root + "/high_noise_model", format, 1);
      low = make(root + "/low_noise_model", format, 2);
      return;
    }
    high = make(root, format, 1);  // root/transformer
    low = make(root + "/second", format, 2);
    fs::rename(root + "/second/transformer", root + "/transformer_2");
    fs::remove_all(root + "/second");
    std::ofstream(root + "/model_index.json") << R"({"_class_name": "WanPipeline", "boundary_ratio": 0.9})";
  }
  std::vector<float> load(const std::string& root, Expert e) const {
    const ParamTable table(config);
    std::vector<float> params(size_t(table.total()));
    load_params(resolve_model(root, "", e), table, 7, params.data());
    return params;
  }
};

TEST(Experts, EachLayoutGivesTheChosenExpertAndItsBoundary) {
  TempDir dir;
  for (const SaveFormat format : {SaveFormat::wan, SaveFormat::diffusers}) {
    const std::string root = dir.file(format == SaveFormat::wan ? "wan" : "diffusers");
    const ExpertFolder f(root, format);
    ASSERT_NE(f.high, f.low);
    EXPECT_EQ(f.load(root, Expert::high), f.high) << root;
    EXPECT_EQ(f.load(root, Expert::low), f.low) << root;
    EXPECT_EQ(resolve_model(root, "", Expert::high).boundary, format == SaveFormat::wan ? 0.0 : 0.9);
    const std::string e = error_of([&] { resolve_model(root, "", Expert::none); });
    EXPECT_NE(e.find("two experts"), std::string::npos) << e;
    EXPECT_NE(e.find("--expert high"), std::string::npos) << e;
  }
}

nlohmann::json saved_options(const std::string& run) {
  std::ifstream in(run + "/latest/trainer.json");
  return nlohmann::json::parse(in)["options"];
}

TEST(Experts, TrainingTakesTheExpertsSideOfTheBoundary) {
  TempDir dir;
  const std::string wan = dir.file("wan"), diffusers = dir.file("diffusers");
  const ExpertFolder a(wan, SaveFormat::wan), b(diffusers, SaveFormat::diffusers);
  const std::string shape = " --steps 1 --frames 1 --height 8 --width 8 --batch-size 1 --out ";
  struct Case {
    std::string args;
    double min, max, boundary;
  };
  for (const Case& c : {Case{"--model " + wan + " --expert high", 875, 1000, 0.875},
                        Case{"--model " + diffusers + " --expert low", 0, 900, 0.9},
                        Case{"--model " + wan + " --expert low --boundary 0.5", 0, 500, 0.5},
                        Case{"--model tiny --expert high --min-timestep 900", 900, 1000, 0.875}}) {
    const std::string run = dir.file("run" + std::to_string(int(c.min + c.max + 1000 * c.boundary)));
    const CliResult r = run_cli("train " + c.args + shape + run);
    ASSERT_EQ(r.code, 0) << c.args << "\n" << r.output;
    const nlohmann::json o = saved_options(run);
    EXPECT_EQ(o["min_timestep"].get<double>(), c.min) << c.args;
    EXPECT_EQ(o["max_timestep"].get<double>(), c.max) << c.args;
    EXPECT_EQ(o["boundary"].get<double>(), c.boundary) << c.args;
    EXPECT_NE(r.output.find("training timesteps ["), std::string::npos) << r.output;
  }
  struct Bad {
    std::string args, phrase;
  };
  for (const Bad& c : {Bad{"--model " + wan, "--expert high"},
                       Bad{"--model " + wan + " --expert low --min-timestep 800 --max-timestep 950",
                           "leave the low-noise expert's timesteps [0, 875]"},
                       Bad{"--model tiny --boundary 0.5", "applies with --expert"},
                       Bad{"--model " + wan + " --expert high --boundary 1", "--boundary"}}) {
    const CliResult r = run_cli("train " + c.args + shape + dir.file("bad"));
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.phrase), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir.file("bad") + "/latest")) << c.args;
  }
}

}  // namespace
}  // namespace ms::test
