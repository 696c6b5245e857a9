// Bad input reaches the user as one clear error line and a non-zero exit, and damages nothing saved.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/param_table.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

ModelConfig tiny_cfg() {
  ModelConfig c;
  c.dim = 12;
  c.ffn_dim = 16;
  c.num_heads = 2;
  c.num_layers = 1;
  c.in_dim = 2;
  c.out_dim = 2;
  c.text_len = 3;
  c.text_dim = 5;
  c.freq_dim = 4;
  return c;
}

void write_json(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(); }

// A model directory with config.json and model.safetensors holding every parameter (random values),
// minus `drop`, with `reshape` given a wrong shape.
void write_model_dir(const TempDir& d, const std::string& drop = "", const std::string& reshape = "") {
  ModelConfig c = tiny_cfg();
  write_json(d.file("config.json"), config_to_json(c));
  ParamTable t(c);
  auto values = randn(size_t(t.total()), 3);
  std::vector<float> f(values.begin(), values.end());
  std::vector<TensorRef> refs;
  for (const auto& p : t.params()) {
    if (p.name == drop) continue;
    Shape s = p.shape;
    if (p.name == reshape) s = {numel(s)};
    refs.push_back({"model.diffusion_model." + p.name, DType::f32, s, f.data() + p.offset});
  }
  write_safetensors(d.file("model.safetensors"), refs);
}

void write_inputs(const std::string& path, int64_t channels = 2) {
  auto lat = to_f32(randn(size_t(1 * channels * 1 * 4 * 6), 1));
  std::vector<float> t{500.0f};
  auto ctx = to_f32(randn(size_t(1 * 2 * 5), 2));
  write_safetensors(path, {{"latents", DType::f32, {1, channels, 1, 4, 6}, lat.data()},
                           {"timestep", DType::f32, {1}, t.data()},
                           {"context", DType::f32, {1, 2, 5}, ctx.data()}});
}

// `megaslide forward` on the model directory d and d/in.safetensors.
CliResult forward_in(const TempDir& d) {
  return run_cli("forward --model " + d.path.string() + " --inputs " + d.file("in.safetensors") + " --out " +
                 d.file("out.safetensors"));
}

}  // namespace

TEST(CliErrors, ForwardRunsOnAGoodModelDirectory) {
  TempDir d;
  write_model_dir(d);
  write_inputs(d.file("in.safetensors"));
  CliResult r = forward_in(d);
  ASSERT_EQ(r.code, 0) << r.output;
  SafetensorsFile out = SafetensorsFile::open(d.file("out.safetensors"));
  ASSERT_NE(out.find("velocity"), nullptr);
  EXPECT_EQ(out.find("velocity")->shape, (Shape{1, 2, 1, 4, 6}));
}

TEST(CliErrors, MalformedInputsFileAndOutputKeptIntact) {
  TempDir d;
  write_model_dir(d);
  const std::string bad("\x10\0\0\0\0\0\0\0{not json}      ", 24);  // header length 16, not JSON
  std::ofstream(d.file("in.safetensors"), std::ios::binary) << bad;
  write_file_atomic(d.file("out.safetensors"), "previous result");
  expect_cli_error(forward_in(d), "in.safetensors");
  EXPECT_EQ(read_file(d.file("out.safetensors")), "previous result");
}

TEST(CliErrors, TruncatedWeights) {
  TempDir d;
  write_model_dir(d);
  std::filesystem::resize_file(d.file("model.safetensors"),
                               std::filesystem::file_size(d.file("model.safetensors")) - 7);
  write_inputs(d.file("in.safetensors"));
  expect_cli_error(forward_in(d), "model.safetensors");
}

TEST(CliErrors, MissingParameter) {
  TempDir d;
  write_model_dir(d, "blocks.0.ffn.0.weight");
  write_inputs(d.file("in.safetensors"));
  expect_cli_error(forward_in(d), "blocks.0.ffn.0.weight");
}

TEST(CliErrors, MisShapedParameter) {
  TempDir d;
  write_model_dir(d, "", "blocks.0.self_attn.q.weight");
  write_inputs(d.file("in.safetensors"));
  expect_cli_error(forward_in(d), "blocks.0.self_attn.q.weight");
}

TEST(CliErrors, WrongInputShape) {
  TempDir d;
  write_model_dir(d);
  write_inputs(d.file("in.safetensors"), 3);  // the model has in_dim 2
  expect_cli_error(forward_in(d), "latents");
}

TEST(CliErrors, ContradictoryConfig) {
  TempDir d;
  auto j = config_to_json(tiny_cfg());
  j["num_heads"] = 5;  // 12 is not divisible by 5
  write_json(d.file("config.json"), j);
  expect_cli_error(run_cli("train --model " + d.path.string() + " --steps 1 --out " + d.file("run")), "num_heads");
  j = config_to_json(tiny_cfg());
  j["model_type"] = "i2v";
  write_json(d.file("config.json"), j);
  expect_cli_error(run_cli("train --model " + d.path.string() + " --steps 1 --out " + d.file("run")), "i2v");
}

TEST(CliErrors, UnknownConfigKeysWarnButLoad) {
  TempDir d;
  write_model_dir(d);
  auto j = config_to_json(tiny_cfg());
  j["_diffusers_version"] = "0.30.0";
  j["frobnicate"] = 1;
  write_json(d.file("config.json"), j);
  write_inputs(d.file("in.safetensors"));
  CliResult r = forward_in(d);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("frobnicate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("_diffusers_version"), std::string::npos) << r.output;
}

TEST(CliErrors, UnwritableOutputDirectory) {
  TempDir d;
  std::ofstream(d.file("file")) << "x";
  expect_cli_error(
      run_cli("train --model tiny --steps 1 --frames 1 --height 8 --width 8 --out " + d.file("file") + "/run"), "run");
}

TEST(CliErrors, CudaBackendWithoutCuda) { expect_cli_error(run_cli("train --backend cuda --steps 1"), "cuda"); }

}  // namespace ms::test
