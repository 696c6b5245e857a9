// The umT5 text encoder: cleaning against Python's, ids against spm_encode (tests/data/t5/, tools/make_t5_fixtures.py),
// the encoder against Wan's own module and against a float64 plain-loop reference, every weight layout, bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/t5_encoder.h"
#include "core/check.h"
#include "core/rng.h"
#include "file_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "t5/clean_text.h"
#include "t5/spm_model.h"
#include "t5/text_encoder.h"
#include "t5_reference.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

std::vector<int64_t> read_ids(const SafetensorsFile& f, const std::string& name) {
  const TensorEntry* e = f.find(name);
  EXPECT_NE(e, nullptr) << name;
  if (!e) return {};
  EXPECT_EQ(e->dtype, DType::i64);
  std::vector<int64_t> v(size_t(numel(e->shape)));
  if (!v.empty()) std::memcpy(v.data(), e->data, v.size() * 8);
  return v;
}

double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i])), scale = std::max(scale, std::abs(b[i]));
  return m / scale;
}

}  // namespace

TEST(T5Text, CleaningIsPythonsHtmlUnescapeAndWhitespaceRules) {
  const auto cases = nlohmann::json::parse(read_file(kT5Data + "clean.json"));
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases) EXPECT_EQ(clean_prompt(c[0].get<std::string>()), c[1].get<std::string>()) << c[0].dump();
  EXPECT_EQ(html_unescape("&ampfoo &amp &#x41"), "&foo & A");  // the legacy names and refs without ';'
  EXPECT_FALSE(valid_utf8("caf\xc3"));
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));      // an overlong '/'
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9 \xf0\x9f\x99\x82"));
  EXPECT_NE(error_of([] { clean_prompt("bad \xff byte"); }).find("not valid UTF-8"), std::string::npos);
}

// The closed form of umT5's table (|r| -> bucket; keys after the query add 16) and the clamp past 128.
TEST(T5Text, RelativeBucketsAreT5s) {
  const std::vector<std::pair<int64_t, int64_t>> edges{{0, 0},   {7, 7},   {8, 8},   {11, 8},  {12, 9},  {15, 9},
                                                       {16, 10}, {22, 10}, {23, 11}, {31, 11}, {32, 12}, {45, 12},
                                                       {46, 13}, {63, 13}, {64, 14}, {90, 14}, {91, 15}, {4000, 15}};
  for (const auto& [n, b] : edges) {
    EXPECT_EQ(t5_bucket(-n, 32), b) << n;
    EXPECT_EQ(t5_bucket(n, 32), n == 0 ? 0 : b + 16) << n;
  }
  for (int64_t buckets : {8, 16, 64})
    for (int64_t r = -300; r <= 300; ++r) EXPECT_EQ(t5_bucket(r, buckets), t5_bucket64(r, buckets)) << r;
}

// The normaliser (NFKC charsmap, whitespace, zero-width and control characters) and the segmentation on raw text,
// against Debian's spm_encode; the byte-fallback model's byte runs are one <unk> here.
TEST(T5Tokenizer, SpmModelMatchesSpmEncodeOnRawText) {
  const auto plain = SpmModel::load(kT5Data + "tiny.model"), bf = SpmModel::load(kT5Data + "tiny_bf.model");
  EXPECT_FALSE(plain.has_byte_pieces());
  EXPECT_TRUE(bf.has_byte_pieces());
  const auto cases = nlohmann::json::parse(read_file(kT5Data + "spm_cases.json"));
  ASSERT_GE(cases.size(), 50u);
  int unk_runs = 0;
  for (const auto& c : cases) {
    const std::string text = c[0].get<std::string>();
    EXPECT_EQ(plain.encode(text), c[1].get<std::vector<int>>()) << c[0].dump();
    std::vector<int> want;
    for (int id : c[2].get<std::vector<int>>()) {
      const bool byte = bf.type(id) == SpmModel::PieceType::byte;
      if (!byte)
        want.push_back(id);
      else if (want.empty() || want.back() != bf.unk_id())
        want.push_back(bf.unk_id()), ++unk_runs;
    }
    EXPECT_EQ(bf.encode(text), want) << c[0].dump();
  }
  EXPECT_GT(unk_runs, 10);
}

TEST(T5Tokenizer, IdsAreSpmEncodesOfTheCleanedPromptWithEos) {
  const auto tok = T5Tokenizer::load(kT5Data + "tiny.model");
  EXPECT_FALSE(tok.byte_fallback());
  const auto prompts = read_prompt_lines(kT5Data + "prompts.txt");
  ASSERT_EQ(prompts.size(), 8u);
  const auto want = SafetensorsFile::open(kT5Data + "expected.safetensors");
  bool truncated = false;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto ids = tok.encode(prompts[k], 160);
    EXPECT_EQ(ids, read_ids(want, "ids." + std::to_string(k))) << prompts[k];
    truncated |= ids.size() == 160;
  }
  EXPECT_TRUE(truncated);
  EXPECT_EQ(tok.encode("", 160), std::vector<int64_t>{1});
  EXPECT_EQ(tok.encode(" \t\xe3\x80\x80 ", 160), std::vector<int64_t>{1});
  EXPECT_EQ(tok.encode(prompts[0], 1), std::vector<int64_t>{1});  // text_len 1 keeps EOS alone
}

// sentencepiece spells characters without a piece as byte pieces in a byte-fallback model; Wan's tokenizer has no
// byte fallback and gives one <unk> (2) per run of them.
TEST(T5Tokenizer, ByteFallbackRunsAreOneUnkAsInWansTokenizer) {
  const auto tok = T5Tokenizer::load(kT5Data + "tiny_bf.model");
  EXPECT_TRUE(tok.byte_fallback());
  const auto prompts = read_prompt_lines(kT5Data + "prompts.txt");
  const auto want = SafetensorsFile::open(kT5Data + "expected.safetensors");
  int runs = 0;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto raw = read_ids(want, "bf_raw." + std::to_string(k));
    std::vector<int64_t> expect;
    for (size_t i = 0; i < raw.size(); ++i) {
      const bool byte = raw[i] >= 3 && raw[i] < 3 + 256;  // spm_train puts the 256 byte pieces after pad/EOS/unk
      const bool prev = i > 0 && raw[i - 1] >= 3 && raw[i - 1] < 3 + 256;
      if (byte && !prev) expect.push_back(2), ++runs;
      if (!byte) expect.push_back(raw[i]);
    }
    if (expect.size() > 159) expect.resize(159);
    expect.push_back(1);
    EXPECT_EQ(tok.encode(prompts[k], 160), expect) << prompts[k];
  }
  EXPECT_GE(runs, 3);  // the accents, the emoji pair and the CJK word
}

TEST(T5Tokenizer, SpecialTokensTypedInAPromptAreTheirIds) {
  const auto tok = T5Tokenizer::load(kT5Data + "tiny.model");
  const auto prompts = read_prompt_lines(kT5Data + "special_prompts.txt");
  const auto want = SafetensorsFile::open(kT5Data + "expected.safetensors");
  for (size_t k = 0; k < prompts.size(); ++k)
    EXPECT_EQ(tok.encode(prompts[k], 160), read_ids(want, "special." + std::to_string(k))) << prompts[k];
}

TEST(T5Tokenizer, BadFilesAreNamed) {
  TempDir dir;
  EXPECT_NE(error_of([&] { T5Tokenizer::load(dir.file("none.model")); }).find("none.model' is not a file"),
            std::string::npos);
  std::ofstream(dir.file("text.model")) << "this is not a sentencepiece model\n";
  const std::string e = error_of([&] { T5Tokenizer::load(dir.file("text.model")); });
  EXPECT_NE(e.find("text.model' is not a sentencepiece model"), std::string::npos) << e;
  const std::string e2 = error_of([&] { T5Tokenizer::load(kT5Data + "tiny_t5.pth"); });
  EXPECT_NE(e2.find("is not a sentencepiece model"), std::string::npos) << e2;
}

TEST(T5Prompts, SplitOnNewlineOnlyAndEmptyFilesAreErrors) {
  TempDir dir;
  write_file_atomic(dir.file("p.txt"), std::string("a\rb\n\nc\xe2\x80\xa8"
                                                   "d\n"));
  EXPECT_EQ(read_prompt_lines(dir.file("p.txt")), (std::vector<std::string>{"a\rb", "",
                                                                            "c\xe2\x80\xa8"
                                                                            "d"}));
  write_file_atomic(dir.file("one.txt"), "\n");
  EXPECT_EQ(read_prompt_lines(dir.file("one.txt")), std::vector<std::string>{""});
  write_file_atomic(dir.file("empty.txt"), "");
  EXPECT_NE(error_of([&] { read_prompt_lines(dir.file("empty.txt")); }).find("holds no prompt"), std::string::npos);
  write_file_atomic(dir.file("bad.txt"), "ok\nbad \xff\n");
  EXPECT_NE(error_of([&] { read_prompt_lines(dir.file("bad.txt")); }).find("line 2 is not valid UTF-8"),
            std::string::npos);
}

// The whole pipeline on Wan's own float64 outputs (padded batch, trimmed): float32 agrees to ~1e-6.
TEST(T5Encoder, MatchesWansT5EncoderOnTheFixture) {
  const TextEncoder enc(kT5Data + "tiny_t5.pth", kT5Data + "tiny.model", kT5Data + "tiny_config.json");
  const auto prompts = read_prompt_lines(kT5Data + "prompts.txt");
  const auto want = SafetensorsFile::open(kT5Data + "expected.safetensors");
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto e = enc.encode(prompts[k]);
    const auto ctx = tensor_values(want, "context." + std::to_string(k));
    ASSERT_EQ(e.context.size(), ctx.size()) << k;
    EXPECT_LT(max_rel(e.context, std::vector<double>(ctx.begin(), ctx.end())), 2e-5) << k;
  }
}

// .pth (bf16, Wan's names), Hugging Face names (prefix, tied alias, a decoder tensor) and Wan-name F32 safetensors
// hold the same values: the outputs are bit-identical.
TEST(T5Encoder, EveryWeightLayoutGivesTheSameOutput) {
  TempDir dir;
  const std::string cfg = kT5Data + "tiny_config.json";
  const auto pth = T5Weights::load(kT5Data + "tiny_t5.pth", cfg);
  std::vector<std::vector<float>> values;
  std::vector<TensorRef> refs;
  for (const auto& [name, shape] : t5_param_shapes(pth.config())) {
    values.emplace_back(size_t(numel(shape)));
    pth.read(name, values.back().data());
  }
  size_t i = 0;
  for (const auto& [name, shape] : t5_param_shapes(pth.config()))
    refs.push_back({name, DType::f32, shape, values[i++].data()});
  write_safetensors(dir.file("wan.safetensors"), refs);
  const std::vector<int64_t> ids{5, 17, 99, 3, 250, 1};
  const auto a = t5_encode(pth, ids);
  EXPECT_EQ(t5_encode(T5Weights::load(kT5Data + "tiny_t5_hf.safetensors", cfg), ids), a);
  EXPECT_EQ(t5_encode(T5Weights::load(dir.file("wan.safetensors"), cfg), ids), a);
}

// Random weights on configs the fixture does not reach (shared table, 16 buckets, 6 heads, dim_attn > dim), L past
// the clamped distance 128, against float64 loops; and the padding mask: the reference run on a padded row gives the
// real tokens' rows that the unpadded encode gives.
TEST(T5Encoder, MatchesFloat64LoopsAndPaddingChangesNothing) {
  struct Case {
    T5Config c;
    int64_t L, pad;
  };
  std::vector<Case> cases;
  T5Config a;
  a.vocab = 53, a.dim = 40, a.dim_attn = 36, a.dim_ffn = 56, a.num_heads = 6, a.num_layers = 2, a.text_len = 200;
  cases.push_back({a, 140, 0});
  T5Config b = a;
  b.shared_pos = true, b.num_buckets = 16, b.dim_attn = 48, b.num_heads = 4, b.num_layers = 3;
  cases.push_back({b, 23, 9});
  cases.push_back({a, 1, 5});
  for (const auto& [c, L, pad] : cases) {
    const auto w = T5Weights::random(c, uint64_t(L));
    std::vector<int64_t> ids;
    Rng rng(uint64_t(L) + 7);
    for (int64_t i = 0; i < L; ++i) ids.push_back(int64_t(rng.next_u64() % uint64_t(c.vocab)));
    const auto got = t5_encode(w, ids);
    std::vector<int64_t> padded = ids;
    padded.resize(size_t(L + pad), 0);
    std::vector<bool> valid(padded.size(), false);
    std::fill(valid.begin(), valid.begin() + L, true);
    auto want = t5_reference(w, padded, valid);
    want.resize(size_t(L * c.dim));
    EXPECT_LT(max_rel(got, want), 1e-5) << "L " << L << " pad " << pad;
  }
}

TEST(T5Encoder, ConfigsThatDisagreeWithTheWeightsAreNamed) {
  const std::string e = error_of([] { T5Weights::load(kT5Data + "tiny_t5.pth", ""); });
  EXPECT_NE(e.find("token_embedding.weight has shape [400, 64], expected [256384, 4096] for umT5-XXL; pass "
                   "--t5-config"),
            std::string::npos)
      << e;
  TempDir dir;
  write_file_atomic(dir.file("c.json"), R"({"vocab": 400, "dim": 64, "dim_attn": 48, "dim_ffn": 80, "num_heads": 4,
                                      "num_layers": 4, "text_len": 160})");
  const std::string e2 = error_of([&] { T5Weights::load(kT5Data + "tiny_t5.pth", dir.file("c.json")); });
  EXPECT_NE(e2.find("text encoder tensors are missing, e.g. 'blocks.3.norm1.weight'"), std::string::npos) << e2;
  write_file_atomic(dir.file("d.json"), R"({"dim_attn": 50, "num_heads": 4})");
  EXPECT_NE(error_of([&] { read_t5_config(dir.file("d.json")); }).find("dim_attn 50 is not a multiple of num_heads 4"),
            std::string::npos);
  write_file_atomic(dir.file("v.json"), R"({"vocab": 200, "dim": 64, "dim_attn": 48, "dim_ffn": 80, "num_heads": 4,
                                      "num_layers": 3, "text_len": 160})");
  const std::string e3 =
      error_of([&] { TextEncoder(kT5Data + "tiny_t5.pth", kT5Data + "tiny.model", dir.file("v.json")); });
  EXPECT_NE(e3.find("token_embedding.weight has shape [400, 64], expected [200, 64]"), std::string::npos) << e3;
}

}  // namespace ms::test
