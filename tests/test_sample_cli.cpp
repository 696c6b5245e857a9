// `megaslide sample` end to end on a checkpoint of a 2-step tiny training run (which also writes
// samples through --sample-every), `megaslide plot` on its metrics, and the errors of bad inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/video.h"
#include "model/config.h"
#include "temp_dir.h"

namespace ms {
namespace {

namespace fs = std::filesystem;

class SampleCli : public ::testing::Test {
 protected:
  // One run for the suite: 2 steps of the tiny preset on 3 frames of 16x16, samples at step 2.
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::TempDir>();
    { std::ofstream(dir_->file("prompts.txt")) << "red circle moving left\nblue square moving up\n"; }
    const auto r = test::run_cli(
        "train --model tiny --steps 2 --save-every 2 --frames 3 --height 16 --width 16 --batch-size 1 "
        "--sample-every 2 --sample-steps 2 --sample-prompts " +
        dir_->file("prompts.txt") + " --out " + run());
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() { dir_.reset(); }
  static std::string run() { return dir_->file("run"); }
  static std::string file(const std::string& name) { return dir_->file(name); }

  static std::unique_ptr<test::TempDir> dir_;
};
std::unique_ptr<test::TempDir> SampleCli::dir_;

void expect_exit_1(const std::string& args, const std::string& message) {
  const auto r = test::run_cli(args);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << "expected '" << message << "' in: " << r.output;
}

TEST_F(SampleCli, TrainingWritesSamplesEveryN) {
  for (const char* name : {"step-2-0.gif", "step-2-1.gif"}) {
    const VideoInfo info = probe_video(run() + "/samples/" + name);
    EXPECT_EQ(info.frames, 3);
    EXPECT_EQ(info.height, 16);
    EXPECT_EQ(info.width, 16);
  }
  // The contact sheet: two rows of three 16 px frames enlarged 5 times, under 6 px margins and 20 px captions.
  const cv::Mat sheet = cv::imread(run() + "/samples/step-2.png");
  EXPECT_EQ(sheet.rows, 6 + 2 * (20 + 5 * 16 + 6));
  EXPECT_EQ(sheet.cols, 6 + 3 * (5 * 16 + 2) - 2 + 6);
}

// The built-in data's run samples its own captions when it ends (no option needed) and its last log line names
// the files; the prompts file is read once, so a pipe (here /dev/stdin) gives every prompt.
TEST_F(SampleCli, RunsEndWithSamplesNamedInTheLastLine) {
  auto r = test::run_cli("train --model tiny --steps 2 --frames 2 --height 8 --width 8 --sample-steps 2 --out " +
                         file("default"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string last = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
  EXPECT_NE(last.find("samples of step 2: " + file("default") + "/samples/step-2.png (contact sheet), 4 clips"),
            std::string::npos)
      << r.output;
  for (int k = 0; k < 4; ++k)
    EXPECT_TRUE(fs::exists(file("default") + "/samples/step-2-" + std::to_string(k) + ".gif"));
  r = test::run_cli_with_input(
      "train --model tiny --steps 1 --frames 2 --height 8 --width 8 --sample-steps 1 --sample-prompts "
      "/dev/stdin --out " +
          file("piped"),
      "red circle moving left\ngreen square moving up\n\nblue circle moving down\n");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 samples"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(file("piped") + "/samples/step-1-2.gif"));
  r = test::run_cli("train --model tiny --steps 1 --frames 2 --height 8 --width 8 --no-final-samples --out " +
                    file("none"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(file("none") + "/samples"));
}

TEST_F(SampleCli, GifAndMp4DecodeBackWithTheRightShape) {
  auto r = test::run_cli("sample --model " + run() + "/latest --prompt 'red circle moving left' --steps 3 --out " +
                         file("a.gif"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;  // progress per step
  RgbVideo v = decode_video(file("a.gif"));
  EXPECT_EQ(v.frames, 3);  // the training extents, from trainer.json
  EXPECT_EQ(v.height, 16);
  EXPECT_EQ(v.width, 16);
  r = test::run_cli("sample --model " + run() +
                    " --prompt 'blue square moving up' --steps 2 --frames 2 --height 12 "
                    "--width 20 --out " +
                    file("b.mp4"));
  ASSERT_EQ(r.code, 0) << r.output;
  v = decode_video(file("b.mp4"));
  EXPECT_EQ(v.frames, 2);
  EXPECT_EQ(v.height, 12);
  EXPECT_EQ(v.width, 20);
}

TEST_F(SampleCli, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string base =
      "sample --model " + run() + "/latest --prompt 'green triangle moving right' --steps 2 --frames 1 ";
  for (const char* out : {"s1.safetensors --seed 9", "s2.safetensors --seed 9", "s3.safetensors --seed 10"})
    ASSERT_EQ(test::run_cli(base + "--out " + file(out)).code, 0);
  EXPECT_EQ(read_file(file("s1.safetensors")), read_file(file("s2.safetensors")));
  EXPECT_NE(read_file(file("s1.safetensors")), read_file(file("s3.safetensors")));
  const auto f = SafetensorsFile::open(file("s1.safetensors"));
  ASSERT_NE(f.find("latents"), nullptr);
  EXPECT_EQ(f.find("latents")->shape, (Shape{1, 3, 1, 16, 16}));
}

TEST_F(SampleCli, ContextFile) {
  std::vector<float> ctx(5 * 64, 0.5f);  // [5, text_dim 64] for the tiny preset
  write_safetensors(file("ctx.safetensors"), {{"context", DType::f32, {5, 64}, ctx.data()}});
  auto r = test::run_cli("sample --model " + run() + "/latest --context " + file("ctx.safetensors") +
                         " --steps 1 --out " + file("c.gif"));
  ASSERT_EQ(r.code, 0) << r.output;
  write_safetensors(file("bad_ctx.safetensors"), {{"context", DType::f32, {8, 40}, ctx.data()}});
  expect_exit_1(
      "sample --model " + run() + "/latest --context " + file("bad_ctx.safetensors") + " --out " + file("d.gif"),
      "this model needs [L, 64]");
}

TEST_F(SampleCli, BadInputsAreClearErrors) {
  expect_exit_1("sample --model " + file("nope") + " --prompt x --out " + file("e.gif"), "--model '" + file("nope"));
  expect_exit_1("sample --model " + run() + "/latest --prompt x --out " + file("e.png"), "has extension '.png'");
  expect_exit_1("sample --model " + run() + "/latest --out " + file("e.gif"), "--prompt TEXT or a text embedding");
  expect_exit_1("sample --model " + run() + "/latest --prompt x --steps 0 --out " + file("e.gif"),
                "--steps must be positive");
  expect_exit_1("sample --model " + run() + "/latest --prompt x --height 15 --out " + file("e.gif"), "height 15");
  expect_exit_1("train --data moving-mnist --sample-every 2 --steps 1 --out " + file("r2"), "needs --sample-prompts");
  { std::ofstream(file("blank.txt")) << "\n  \n"; }
  expect_exit_1("train --steps 1 --sample-prompts " + file("blank.txt") + " --out " + file("r3"), "holds no prompts");
}

TEST_F(SampleCli, LatentModelWritesLatents) {
  ModelConfig c = preset_config("tiny");
  c.in_dim = c.out_dim = 4;
  fs::create_directories(file("latent_model"));
  { std::ofstream(file("latent_model/config.json")) << config_to_json(c).dump(); }
  const auto r = test::run_cli("sample --model " + file("latent_model") +
                               " --prompt x --steps 1 --frames 2 --height 4 --width 4 --out " + file("l.mp4"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("become a video through the VAE (--vae"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(file("l.mp4")));
  EXPECT_EQ(SafetensorsFile::open(file("l.safetensors")).find("latents")->shape, (Shape{1, 4, 2, 4, 4}));
}

TEST_F(SampleCli, PlotDrawsLossCurves) {
  const auto r = test::run_cli("plot " + run() + " " + run() + " --smooth 2 --out " + file("loss.png"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_GT(fs::file_size(file("loss.png")), 1000u);
  expect_exit_1("plot " + file("nowhere") + " --out " + file("x.png"), "metrics.jsonl");
  expect_exit_1("plot " + run() + " --metric nope --out " + file("x.png"), "no numeric 'nope'");
}

}  // namespace
}  // namespace ms
