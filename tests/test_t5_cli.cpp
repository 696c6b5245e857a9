// `megaslide text-encode` end to end on tests/data/t5/: Wan's own ids and contexts, and bad input named.
#include <gtest/gtest.h>

#include <cstring>

#include "cli_util.h"
#include "file_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "registry/registry.h"
#include "t5/spm_model.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

// The CPU's float32 encoder, whose results the fixtures hold to 1e-5 (the GPU's runs bf16: tests/cuda/test_t5.cpp).
const std::string kEncoder = "text-encode --t5 " + kT5Data + "tiny_t5.pth --tokenizer " + kT5Data +
                             "tiny.model --t5-config " + kT5Data + "tiny_config.json";
const std::string kArgs = kEncoder + " --backend cpu";

}  // namespace

TEST(TextEncodeCli, WritesWansIdsAndContextPerPrompt) {
  TempDir dir;
  auto r = run_cli(kArgs + " --prompts " + kT5Data + "prompts.txt --out " + dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("prompt 8 of 8: 21 tokens in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak memory"), std::string::npos) << r.output;
  const auto got = SafetensorsFile::open(dir.file("out.safetensors"));
  const auto want = SafetensorsFile::open(kT5Data + "expected.safetensors");
  EXPECT_EQ(got.entries().size(), 16u);
  for (int k = 0; k < 8; ++k) {
    const TensorEntry* ids = got.find("ids." + std::to_string(k));
    const TensorEntry* wids = want.find("ids." + std::to_string(k));
    ASSERT_TRUE(ids && wids);
    EXPECT_EQ(ids->dtype, DType::i64);
    ASSERT_EQ(ids->shape, wids->shape);
    EXPECT_EQ(std::memcmp(ids->data, wids->data, size_t(ids->nbytes)), 0) << k;
    const TensorEntry* ctx = got.find("context." + std::to_string(k));
    ASSERT_TRUE(ctx);
    EXPECT_EQ(ctx->dtype, DType::f32);
    EXPECT_EQ(ctx->shape, (Shape{ids->shape[0], 64}));
    std::vector<float> a(size_t(numel(ctx->shape))), b(a.size());
    read_as_f32(*ctx, a.data());
    read_as_f32(*want.find("context." + std::to_string(k)), b.data());
    EXPECT_LT(rel_l2(a, b), 1e-5) << k;
  }
  r = run_cli(kArgs + " --prompt 'A red cat walks slowly on the wooden table, cinematic close shot' --out " +
              dir.file("one.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto one = SafetensorsFile::open(dir.file("one.safetensors"));
  ASSERT_EQ(one.entries().size(), 2u);
  EXPECT_EQ(
      std::memcmp(one.find("context.0")->data, got.find("context.0")->data, size_t(got.find("context.0")->nbytes)), 0);
}

TEST(TextEncodeCli, BadInputIsNamed) {
  TempDir dir;
  const std::string out = " --out " + dir.file("o.safetensors");
  write_file_atomic(dir.file("empty.txt"), "");
  auto r = run_cli(kArgs + " --prompts " + dir.file("empty.txt") + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("empty.txt' holds no prompt"), std::string::npos) << r.output;
  r = run_cli(kArgs + " --prompt a --prompts " + kT5Data + "prompts.txt" + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;
  r = run_cli(kArgs + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("needs --prompt TEXT or --prompts FILE"), std::string::npos) << r.output;
  r = run_cli("text-encode --t5 " + kT5Data + "tiny_t5.pth --tokenizer " + kT5Data + "tiny_config.json --t5-config " +
              kT5Data + "tiny_config.json --prompt a" + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("tiny_config.json' is not a sentencepiece model"), std::string::npos) << r.output;
  r = run_cli("text-encode --t5 " + kT5Data + "tiny_t5.pth --tokenizer " + kT5Data + "tiny.model --prompt a" + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("pass --t5-config"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.safetensors")));
}

// Without a usable GPU, --backend cuda names why and the way out, before anything is loaded or written.
TEST(TextEncodeCli, BackendCudaWithoutAGpuIsAClearError) {
  if (backend_unavailable(BackendKind::cuda).empty()) GTEST_SKIP() << "a GPU is present: this checks a machine without";
  TempDir dir;
  const auto r = run_cli(kEncoder + " --prompt a --backend cuda --out " + dir.file("o.safetensors"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--backend cuda: " + backend_unavailable(BackendKind::cuda)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("leave --backend out to run on the CPU"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.safetensors")));
}

// Truncated and bit-flipped tokenizer files load or fail with a message; none crashes the reader.
TEST(TextEncodeCli, DamagedTokenizerFilesNeverCrash) {
  TempDir dir;
  const std::string model = read_file(kT5Data + "tiny.model");
  int refused = 0;
  for (size_t cut = 1; cut < model.size(); cut += 4099) {
    std::string damaged = model.substr(0, cut);
    if (cut % 2) damaged[cut / 2] = char(damaged[cut / 2] ^ 0x5A);
    write_file_atomic(dir.file("d.model"), damaged);
    try {
      const auto m = SpmModel::load(dir.file("d.model"));
      m.encode("caf\xc3\xa9 the red cat \xef\xbc\xa1");
    } catch (const Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find("d.model"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 10);
}

}  // namespace ms::test
