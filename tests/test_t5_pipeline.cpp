// The text encoder in the pipeline: prompt contexts (Wan's zero padding), classifier-free guidance, and train /
// sample / text-encode --t5 end to end on the tiny preset (text_dim 64, as the fixture encoder's width).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/rng.h"
#include "file_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/init.h"
#include "model/param_table.h"
#include "sample/generate.h"
#include "t5/text_encoder.h"
#include "temp_dir.h"
#include "test_util.h"
#include "video_util.h"

namespace ms::test {
namespace {

// The fixture encoder with text_len 16, the tiny preset's.
std::string tiny16_config(const TempDir& dir) {
  write_file_atomic(dir.file("t5_16.json"), R"({"vocab": 400, "dim": 64, "dim_attn": 48, "dim_ffn": 80,
      "num_heads": 4, "num_layers": 3, "num_buckets": 32, "shared_pos": false, "text_len": 16})");
  return dir.file("t5_16.json");
}

std::string t5_args(const TempDir& dir) {
  return " --t5 " + kT5Data + "tiny_t5.pth --tokenizer " + kT5Data + "tiny.model --t5-config " + tiny16_config(dir);
}

}  // namespace

TEST(T5Pipeline, PromptContextIsTheEncoderRowsZeroPadded) {
  TempDir dir;
  const ModelConfig c = preset_config("tiny");
  const TextEncoder t5(kT5Data + "tiny_t5.pth", kT5Data + "tiny.model", tiny16_config(dir));
  const std::string prompt = "A red cat walks slowly on the wooden table";
  const EncodedPrompt e = t5.encode(prompt);
  const std::vector<float> ctx = prompt_context(c, prompt, &t5);
  ASSERT_EQ(ctx.size(), size_t(c.text_len * c.text_dim));
  const size_t real = e.context.size();
  EXPECT_EQ(real, e.ids.size() * 64);
  EXPECT_TRUE(std::equal(e.context.begin(), e.context.end(), ctx.begin()));
  for (size_t i = real; i < ctx.size(); ++i) ASSERT_EQ(ctx[i], 0.0f);
  ModelConfig wide = c;
  wide.text_dim = 48;
  EXPECT_NE(
      error_of([&] { check_text_encoder_fits(wide, t5); }).find("rows of width 64 but the model's text_dim is 48"),
      std::string::npos);
  const TextEncoder long_t5(kT5Data + "tiny_t5.pth", kT5Data + "tiny.model", kT5Data + "tiny_config.json");
  EXPECT_NE(error_of([&] { check_text_encoder_fits(c, long_t5); }).find("keeps up to 160 tokens"), std::string::npos);
}

// Scale 1 runs the conditional model alone (bit-identical to no guidance); scale 0 is the negative prompt's sample
// (v = v_neg + 0 (v - v_neg) = v_neg exactly); scale 3 is neither.
TEST(T5Pipeline, GuidanceScaleOneIsUnguidedAndZeroIsTheNegative) {
  const ModelConfig c = preset_config("tiny");
  ParamTable table(c);
  std::vector<float> params(size_t(table.total()));
  init_params(table, c.dim, 11, params.data());
  Rng r(12);
  for (auto& p : params)
    if (p == 0) p = float(0.02 * r.normal());
  const auto pos = prompt_context(c, "red circle moving left"), neg = prompt_context(c, "blurry static frame");
  const DataShape shape{3, 2, 8, 10};
  const SamplerConfig sampler{3, 5.0};
  const ModelForward model = cpu_model_forward(c, params.data(), shape, c.text_len);
  auto run = [&](const std::vector<float>& ctx, const Guidance& g) {
    return generate_clip(c, model, ctx.data(), c.text_len, shape, sampler, 4, {}, g);
  };
  const auto plain = run(pos, {});
  EXPECT_EQ(run(pos, {neg.data(), 1.0}), plain);
  EXPECT_EQ(run(pos, {neg.data(), 0.0}), run(neg, {}));
  const auto guided = run(pos, {neg.data(), 3.0});
  EXPECT_GT(rel_l2(guided, plain), 1e-3);
  for (float v : guided) ASSERT_TRUE(std::isfinite(v));
}

// train --t5 embeds the synthetic data's captions and its sample prompts; sample --t5 guides with Wan's negative
// prompt; sample --context takes text-encode's context.0; a checkpoint's text_len shorter than the encoder's is named.
TEST(T5Pipeline, TrainAndSampleWithTheTextEncoder) {
  TempDir dir;
  write_file_atomic(dir.file("prompts.txt"), "red circle moving left\n");
  auto r = run_cli(
      "train --model tiny --steps 2 --save-every 2 --frames 3 --height 16 --width 16 --batch-size 1 --sample-every 2 "
      "--sample-steps 2 --sample-format mp4 --sample-prompts " +
      dir.file("prompts.txt") + t5_args(dir) + " --out " + dir.file("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("captions are embedded by umT5"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/samples/step-2-0.mp4")));
  r = run_cli("sample --model " + dir.file("run") + " --prompt 'red circle moving left' --steps 2" + t5_args(dir) +
              " --out " + dir.file("a.mp4"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("guidance scale 5"), std::string::npos) << r.output;
  r = run_cli("text-encode --backend cpu --prompt 'red circle moving left'" + t5_args(dir) + " --out " +
              dir.file("ctx.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_cli("sample --model " + dir.file("run") + " --context " + dir.file("ctx.safetensors") + " --steps 2 --out " +
              dir.file("b.mp4"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("no guidance"), std::string::npos) << r.output;
  r = run_cli("sample --model " + dir.file("run") + " --context " + dir.file("ctx.safetensors") +
              " --guidance-scale 4 --steps 2 --out " + dir.file("c.mp4"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("needs --t5 and --tokenizer to encode the negative prompt"), std::string::npos) << r.output;
  r = run_cli("sample --model " + dir.file("run") + " --prompt x --t5 " + kT5Data + "tiny_t5.pth --tokenizer " +
              kT5Data + "tiny.model --t5-config " + kT5Data + "tiny_config.json --out " + dir.file("d.mp4"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("keeps up to 160 tokens but the model's text_len is 16"), std::string::npos) << r.output;
  r = run_cli("train --steps 1 --t5 " + kT5Data + "tiny_t5.pth --out " + dir.file("run2"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--t5 needs --tokenizer"), std::string::npos) << r.output;
}

// cache --t5 writes one musubi-tuner text file per video (its key, bf16, metadata), each the encoder's output for the
// file's caption; with --vae as well the cache trains a model of the encoder's width; a second run writes nothing.
TEST(T5Pipeline, CacheWritesMusubisTextFiles) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("videos"));
  const std::map<std::string, std::string> captions{{"a", "a red cat walks on the table"},
                                                    {"b", "two dogs run  &amp; jump"}};
  for (const auto& [name, caption] : captions) {
    encode_video(dir.file("videos/" + name + ".mp4"), smooth_clip(9, 20, 36, name[0]));
    write_file_atomic(dir.file("videos/" + name + ".txt"), caption);
  }
  write_file_atomic(dir.file("data.toml"),
                    "[[datasets]]\nvideo_directory = \"videos\"\ncache_directory = \"cache\"\n"
                    "resolution = [32, 16]\ntarget_frames = [5]\nframe_extraction = \"slide\"\n"
                    "frame_stride = 4\n");
  const std::string vae = " --vae " + std::string(MEGASLIDE_TEST_DATA) + "/vae/tiny_vae.pth --vae-config " +
                          std::string(MEGASLIDE_TEST_DATA) + "/vae/tiny_config.json";
  const std::string t5 = " --t5 " + kT5Data + "tiny_t5.pth --tokenizer " + kT5Data + "tiny.model --t5-config " +
                         kT5Data + "tiny_config.json";
  auto r = run_cli("cache --backend cpu --data " + dir.file("data.toml") + vae + t5);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("text: cached 2 captions, 2 were cached already"), std::string::npos) << r.output;
  const TextEncoder enc(kT5Data + "tiny_t5.pth", kT5Data + "tiny.model", kT5Data + "tiny_config.json");
  for (const auto& [name, caption] : captions) {
    const auto f = SafetensorsFile::open(dir.file("cache/" + name + "_wan_te.safetensors"));
    const TensorEntry* e = f.find("varlen_t5_bfloat16");
    ASSERT_NE(e, nullptr);
    const EncodedPrompt want = enc.encode(caption);
    EXPECT_EQ(e->dtype, DType::bf16);
    EXPECT_EQ(e->shape, (Shape{int64_t(want.ids.size()), 64}));
    std::vector<float> got(want.context.size());
    read_as_f32(*e, got.data());
    EXPECT_LT(rel_l2(got, want.context), 4e-3) << name;  // bf16
    EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{
                                {"architecture", "wan"}, {"caption1", caption}, {"format_version", "1.0.1"}}));
  }
  r = run_cli("cache --backend cpu --data " + dir.file("data.toml") + t5);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("text: cached 0 captions, 4 were cached already"), std::string::npos) << r.output;
  ModelConfig c;
  c.dim = 16, c.ffn_dim = 24, c.num_heads = 2, c.num_layers = 2, c.freq_dim = 8;
  c.in_dim = c.out_dim = 16, c.text_dim = 64, c.text_len = 160;
  c.patch_size = {1, 2, 2};
  c.validate();
  write_file_atomic(dir.file("config.json"), config_to_json(c).dump());
  write_file_atomic(dir.file("cache.toml"), "[[datasets]]\ncache_directory = \"cache\"\n");
  r = run_cli("train --data " + dir.file("cache.toml") + " --config " + dir.file("config.json") + " --steps 2 --out " +
              dir.file("run"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(run_cli("cache --data " + dir.file("data.toml")).code, 1);
}

}  // namespace ms::test
