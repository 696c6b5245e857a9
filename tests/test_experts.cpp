// Wan2.2 A14B's two experts: their folders in Wan's and diffusers' layouts, and `train --expert`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/dtype.h"
#include "core/text.h"
#include "file_util.h"
#include "io/atomic_file.h"
#include "model/export.h"
#include "model/init.h"
#include "model/loader.h"
#include "model/param_table.h"
#include "sample/generate.h"
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

// `convert` of a two-expert folder: Wan's layout to diffusers' and back gives every weights file byte for byte, the
// diffusers folder holds each expert where diffusers' WanPipeline looks (transformer_2 the low-noise one) with the
// boundary, a diffusers folder's own boundary is named when Wan's layout cannot keep it, and --to megaslide is refused.
TEST(Experts, ConvertRoundTripsBothLayoutsBitExact) {
  TempDir dir;
  const ExpertFolder f(dir.file("wan"), SaveFormat::wan);
  CliResult r = run_cli("convert " + dir.file("wan") + " " + dir.file("d") + " --to diffusers");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(f.load(dir.file("d"), Expert::high), f.high);
  EXPECT_EQ(f.load(dir.file("d"), Expert::low), f.low);
  EXPECT_EQ(resolve_model(dir.file("d"), "", Expert::low).boundary, 0.875);
  EXPECT_TRUE(fs::exists(dir.file("d/transformer_2/config.json")));
  r = run_cli("convert " + dir.file("d") + " " + dir.file("w") + " --to wan");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* e : {"high_noise_model", "low_noise_model"})
    for (const char* file : {"diffusion_pytorch_model.safetensors", "config.json"})
      EXPECT_EQ(read_bytes(dir.file(cat("w/", e, "/", file))), read_bytes(dir.file(cat("wan/", e, "/", file))))
          << e << "/" << file;

  const ExpertFolder g(dir.file("dif"), SaveFormat::diffusers);  // boundary_ratio 0.9
  r = run_cli("convert " + dir.file("dif") + " " + dir.file("w2") + " --to wan");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("boundary_ratio 0.9 is not kept"), std::string::npos) << r.output;
  EXPECT_EQ(g.load(dir.file("w2"), Expert::low), g.low);
  r = run_cli("convert " + dir.file("wan") + " " + dir.file("m") + " --to megaslide");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("holds two experts"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.file("m")));
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

// The sampler's expert switch: the high-noise forward at timesteps >= 1000 boundary, the low-noise one below; each made
// once, when first needed, and the high-noise one released before the low-noise one is made.
TEST(Experts, SamplingSwitchesOnceFromTheHighToTheLowNoiseExpert) {
  std::vector<std::string> events;
  auto factory = [&](const std::string& name) {
    return [&events, name] {
      events.push_back("make " + name);
      auto alive = std::shared_ptr<int>(new int(0), [&events, name](int* p) {
        events.push_back("release " + name);
        delete p;
      });
      return ModelForward([&events, name, alive](const float*, const float* t, const float*, float*) {
        events.push_back(name + " " + std::to_string(int(*t)));
      });
    };
  };
  {
    const ModelForward f = expert_forward(factory("high"), factory("low"), 0.875);
    for (const float t : {1000.f, 900.f, 875.f, 874.f, 500.f, 0.f}) f(nullptr, &t, nullptr, nullptr);
  }
  EXPECT_EQ(events, (std::vector<std::string>{"make high", "high 1000", "high 900", "high 875", "release high",
                                              "make low", "low 874", "low 500", "low 0", "release low"}));
  const Guidance g{nullptr, 4.0, 0.875, 3.0};
  EXPECT_EQ(g.scale_at(875), 4.0);
  EXPECT_EQ(g.scale_at(874.9), 3.0);
  EXPECT_EQ(Guidance{}.scale_at(0), 1.0);
}

// `sample` on a two-expert folder: the experts take over in turn, and with every step above the boundary the sample
// is the high-noise expert's own, byte for byte.
TEST(Experts, SampleRunsBothExpertsOfAFolder) {
  TempDir dir;
  const std::string wan = dir.file("wan");
  const ExpertFolder f(wan, SaveFormat::wan);
  const std::string common = " --prompt 'a red square' --frames 1 --height 8 --width 8 --steps 6 --shift 1 --out ";
  const CliResult both = run_cli("sample --model " + wan + " --boundary 0.5" + common + dir.file("both.safetensors"));
  ASSERT_EQ(both.code, 0) << both.output;
  // steps at t 1, 5/6, 4/6, 3/6 on the high-noise expert, then 2/6 and 1/6 on the low-noise one
  const size_t high = both.output.find("the high-noise expert takes over"), step4 = both.output.find("step 4/6"),
               low = both.output.find("the low-noise expert takes over"), step5 = both.output.find("step 5/6");
  ASSERT_NE(low, std::string::npos) << both.output;
  EXPECT_TRUE(high < step4 && step4 < low && low < step5) << both.output;
  const CliResult all_high =
      run_cli("sample --model " + wan + " --boundary 0.001" + common + dir.file("high.safetensors"));
  const CliResult alone =
      run_cli("sample --model " + wan + "/high_noise_model" + common + dir.file("alone.safetensors"));
  ASSERT_EQ(all_high.code, 0) << all_high.output;
  ASSERT_EQ(alone.code, 0) << alone.output;
  EXPECT_EQ(all_high.output.find("low-noise expert takes over"), std::string::npos) << all_high.output;
  EXPECT_EQ(read_file(dir.file("high.safetensors")), read_file(dir.file("alone.safetensors")));
  EXPECT_NE(read_file(dir.file("both.safetensors")), read_file(dir.file("alone.safetensors")));
  const CliResult bad =
      run_cli("sample --model " + wan + "/high_noise_model --boundary 0.5" + common + dir.file("x.gif"));
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--boundary applies to a Wan2.2 A14B folder"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace ms::test
