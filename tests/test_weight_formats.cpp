// Weights in the forms users hold them: fp8 (every code against the closed form), ComfyUI's scaled fp8, diffusers'
// names and config, config inference for single files, and `megaslide convert` round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli_util.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/text.h"
#include "io/safetensors.h"
#include "io/weight_files.h"
#include "model/export.h"
#include "model/init.h"
#include "model/loader.h"
#include "model/name_map.h"
#include "model/param_table.h"
#include "small_config.h"
#include "temp_dir.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

// An fp8 code's value from the format's definition: (-1)^s 2^(e - bias) (1 + m / 2^mbits), subnormal at e = 0.
long double fp8_reference(uint8_t b, int exp_bits, int man_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1, e = (b >> man_bits) & ((1 << exp_bits) - 1),
            m = b & ((1 << man_bits) - 1);
  const long double sign = b & 0x80 ? -1.0L : 1.0L, frac = (long double)m / (1 << man_bits);
  if (e == 0) return sign * std::ldexp(frac, 1 - bias);
  return sign * std::ldexp(1.0L + frac, e - bias);
}

TEST(Fp8, EveryE4M3CodeMatchesTheDefinition) {
  for (int b = 0; b < 256; ++b) {
    const float got = f8_e4m3_to_f32(uint8_t(b));
    if ((b & 0x7f) == 0x7f) {  // E4M3FN: S.1111.111 is NaN, and there are no infinities
      EXPECT_TRUE(std::isnan(got)) << b;
      continue;
    }
    EXPECT_EQ((long double)got, fp8_reference(uint8_t(b), 4, 3)) << b;
  }
  EXPECT_EQ(f8_e4m3_to_f32(0x7e), 448.0f);                // the largest finite value
  EXPECT_EQ(f8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(f8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::signbit(f8_e4m3_to_f32(0x80)));  // -0
}

TEST(Fp8, EveryE5M2CodeMatchesTheDefinition) {
  for (int b = 0; b < 256; ++b) {
    const float got = f8_e5m2_to_f32(uint8_t(b));
    const int mag = b & 0x7f;
    if (mag == 0x7c) {
      EXPECT_EQ(got, b & 0x80 ? -INFINITY : INFINITY) << b;
    } else if (mag > 0x7c) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ((long double)got, fp8_reference(uint8_t(b), 5, 2)) << b;
    }
  }
  EXPECT_EQ(f8_e5m2_to_f32(0x7b), 57344.0f);
  EXPECT_EQ(f8_e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
}

// Random fp8 codes that are finite in both formats.
std::vector<uint8_t> fp8_codes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& c : v) do
      c = uint8_t(rng());
    while ((c & 0x7f) >= 0x7c);
  return v;
}

TEST(Fp8, SafetensorsFp8TensorsWidenAndComfyScalesApply) {
  TempDir dir;
  const std::vector<uint8_t> w = fp8_codes(12, 1), v = fp8_codes(10, 2);
  const float scale = 0.37f, rows[2] = {1.5f, -0.25f};
  const uint8_t marker[1] = {0};
  const std::string path = dir.file("comfy.safetensors");
  write_safetensors(path, {{"model.diffusion_model.blocks.0.ffn.0.weight", DType::f8_e4m3, {3, 4}, w.data()},
                           {"model.diffusion_model.blocks.0.ffn.0.scale_weight", DType::f32, {}, &scale},
                           {"model.diffusion_model.blocks.0.ffn.0.scale_input", DType::f32, {}, &scale},
                           {"model.diffusion_model.head.head.weight", DType::f8_e5m2, {2, 5}, v.data()},
                           {"model.diffusion_model.head.head.scale_weight", DType::f32, {2}, rows},
                           {"model.diffusion_model.scaled_fp8", DType::f8_e4m3, {1}, marker}});
  const WeightFiles f = WeightFiles::open(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"blocks.0.ffn.0.weight", "head.head.weight"}));
  std::vector<float> got(12);
  f.read_f32("blocks.0.ffn.0.weight", got.data());
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(got[i], f8_e4m3_to_f32(w[i]) * scale) << i;
  got.resize(10);
  f.read_f32("head.head.weight", got.data());
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(got[i], f8_e5m2_to_f32(v[i]) * rows[i / 5]) << i;

  const float three[3] = {1, 2, 3};
  write_safetensors(path, {{"a.weight", DType::f8_e4m3, {2, 6}, w.data()}, {"a.scale_weight", DType::f32, {3}, three}});
  EXPECT_THROW(WeightFiles::open(path), Error);  // neither one scale nor one per row
  write_safetensors(path, {{"b.scale_weight", DType::f32, {}, &scale}});
  EXPECT_THROW(WeightFiles::open(path), Error);  // a scale without its weight
}

// Rounding a buffer to bf16 where it lies (sample's weights for a GPU): each value f32_to_bf16 of the float that was
// there, over several of its chunks and a ragged end, on random bit patterns (NaN and infinities too).
TEST(Bf16, NarrowingInPlaceEqualsTheCopy) {
  const int64_t n = (int64_t(1) << 21) + 12345;
  std::vector<float> data(static_cast<size_t>(n));
  std::mt19937 gen(5);
  for (float& x : data) {
    const uint32_t b = uint32_t(gen());
    std::memcpy(&x, &b, 4);
  }
  std::vector<uint16_t> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = f32_to_bf16(data[size_t(i)]);
  const uint16_t* got = narrow_to_bf16_in_place(data.data(), n);
  ASSERT_EQ(static_cast<const void*>(got), static_cast<const void*>(data.data()));
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got));
}

TEST(NameMap, DiffusersNamesRoundTripOverEveryParameter) {
  const ParamTable table(with_attention(small_config(), "dsa", {3, 3, 3}));
  std::set<std::string> seen;
  for (const ParamInfo& p : table.params()) {
    const std::string d = wan_to_diffusers(p.name);
    ASSERT_FALSE(d.empty()) << p.name;
    EXPECT_TRUE(seen.insert(d).second) << d;
    EXPECT_EQ(diffusers_to_wan(d), p.name);
  }
  // Spot checks against diffusers' own conversion table (scripts/convert_wan_to_diffusers.py).
  EXPECT_EQ(wan_to_diffusers("blocks.12.self_attn.o.weight"), "blocks.12.attn1.to_out.0.weight");
  EXPECT_EQ(wan_to_diffusers("blocks.0.cross_attn.norm_k.weight"), "blocks.0.attn2.norm_k.weight");
  EXPECT_EQ(wan_to_diffusers("blocks.3.norm3.bias"), "blocks.3.norm2.bias");
  EXPECT_EQ(wan_to_diffusers("blocks.3.ffn.0.weight"), "blocks.3.ffn.net.0.proj.weight");
  EXPECT_EQ(wan_to_diffusers("blocks.3.ffn.2.bias"), "blocks.3.ffn.net.2.bias");
  EXPECT_EQ(wan_to_diffusers("blocks.3.modulation"), "blocks.3.scale_shift_table");
  EXPECT_EQ(wan_to_diffusers("head.modulation"), "scale_shift_table");
  EXPECT_EQ(wan_to_diffusers("head.head.weight"), "proj_out.weight");
  EXPECT_EQ(wan_to_diffusers("time_projection.1.bias"), "condition_embedder.time_proj.bias");
  EXPECT_EQ(wan_to_diffusers("text_embedding.2.weight"), "condition_embedder.text_embedder.linear_2.weight");
  EXPECT_EQ(wan_to_diffusers("time_embedding.0.weight"), "condition_embedder.time_embedder.linear_1.weight");
  // Outside the map.
  EXPECT_EQ(wan_to_diffusers("blocks.x.norm3.bias"), "");
  EXPECT_EQ(diffusers_to_wan("blocks.0.norm3.weight"), "");  // diffusers' norm3 has no parameters
  EXPECT_EQ(diffusers_to_wan("img_emb.proj.0.weight"), "");
}

TEST(NameMap, DiffusersConfigRoundTripsAndReadsDiffusersOwn) {
  const ModelConfig c = with_attention(small_config(), "dsa", {3, 1, 3}, 1);
  const ModelConfig back = config_from_diffusers(config_to_diffusers(c), "test");
  EXPECT_EQ(config_to_json(back), config_to_json(c));
  // The 1.3B transformer config as diffusers' conversion script writes it.
  const nlohmann::json d = nlohmann::json::parse(R"({"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": null,
      "attention_head_dim": 128, "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 8960, "freq_dim": 256,
      "in_channels": 16, "num_attention_heads": 12, "num_layers": 30, "out_channels": 16, "patch_size": [1, 2, 2],
      "qk_norm": "rms_norm_across_heads", "text_dim": 4096, "rope_max_seq_len": 1024, "image_dim": null})");
  EXPECT_TRUE(is_diffusers_config(d));
  EXPECT_EQ(config_to_json(config_from_diffusers(d, "d")), config_to_json(preset_config("wan2.1-1.3b")));
  nlohmann::json i2v = d;
  i2v["image_dim"] = 1280;
  EXPECT_THROW(config_from_diffusers(i2v, "i2v"), Error);
  nlohmann::json other_norm = d;
  other_norm["qk_norm"] = "rms_norm";
  EXPECT_THROW(config_from_diffusers(other_norm, "qk"), Error);
}

// The shape-bearing tensors of a Wan model with `layers` blocks of the given dims, as a ComfyUI single file holds
// them (prefixed), in fp8 to keep the file small: what infer_config reads.
void write_shapes_only(const std::string& path, int64_t dim, int64_t ffn, int64_t layers, bool i2v = false) {
  std::vector<std::string> names;
  std::vector<Shape> shapes = {{dim, 16, 1, 2, 2}, {64, dim}, {ffn, dim}, {dim, 4096}, {dim, 256}};
  for (const char* n : {"patch_embedding.weight", "head.head.weight", "blocks.0.ffn.0.weight",
                        "text_embedding.0.weight", "time_embedding.0.weight"})
    names.push_back(n);
  for (int64_t i = 0; i < layers; ++i) {
    names.push_back(cat("blocks.", i, ".modulation"));
    shapes.push_back({1, 6, dim});
  }
  if (i2v) {
    names.push_back("img_emb.proj.0.weight");
    shapes.push_back({1280});
  }
  int64_t most = 0;
  for (const Shape& s : shapes) most = std::max(most, numel(s));
  const std::vector<uint8_t> bytes(size_t(most), 0x38);  // 1.0 in E4M3
  std::vector<TensorRef> refs;
  for (size_t i = 0; i < names.size(); ++i)
    refs.push_back({"model.diffusion_model." + names[i], DType::f8_e4m3, shapes[i], bytes.data()});
  write_safetensors(path, refs);
}

TEST(ConfigInference, SingleFilesOfKnownShapesGetTheirConfig) {
  TempDir dir;
  const std::string path = dir.file("wan2.1_t2v_1.3B_fp8_e4m3fn.safetensors");
  write_shapes_only(path, 1536, 8960, 30);
  EXPECT_EQ(config_to_json(infer_config(path)), config_to_json(preset_config("wan2.1-1.3b")));
  EXPECT_EQ(config_to_json(resolve_model(path, "").config), config_to_json(preset_config("wan2.1-1.3b")));
  write_shapes_only(path, 1536, 8960, 29);  // a layer short: no known config
  try {
    infer_config(path);
    FAIL() << "inferred a config for unknown shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--config"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("29 layers"), std::string::npos) << e.what();
  }
  write_shapes_only(path, 1536, 8960, 30, true);
  EXPECT_THROW(infer_config(path), Error);
}

TEST(Safetensors, HeaderBytesAreEscapedInMessages) {
  TempDir dir;
  const std::string header = "{\"a\xff\x1b[31m\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(uint8_t(header.size() >> (8 * i)));
  bytes += header + std::string(4, '\0');
  const std::string path = dir.file("bad.safetensors");
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  try {
    SafetensorsFile::open(path);
    FAIL() << "opened a header that is not UTF-8";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\xff'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
    EXPECT_NE(m.find("\\xff"), std::string::npos) << m;
  }
  EXPECT_EQ(escape_text("ok ü \xff\x01\\"), "ok ü \\xff\\x01\\\\");
  EXPECT_EQ(escape_text("abcdef", 3), "abc...");
  EXPECT_EQ(quote_text("\xc0\xaf"), "'\\xc0\\xaf'");                             // an overlong '/', not a character
  EXPECT_EQ(escape_text("a\u202eb\u2066"), "a\\xe2\\x80\\xaeb\\xe2\\x81\\xa6");  // bidirectional controls
}

// The bytes of each tensor of a weights location, keyed by Wan name.
std::map<std::string, std::string> tensor_bytes(const std::string& weights) {
  const WeightFiles f = open_model_weights(weights);
  std::map<std::string, std::string> out;
  for (const std::string& n : f.names()) {
    const TensorEntry* e = f.find(n);
    out[n] = std::string(dtype_name(e->dtype)) + shape_str(e->shape) +
             std::string(reinterpret_cast<const char*>(e->data), size_t(e->nbytes));
  }
  return out;
}

TEST(Convert, RoundTripsThroughWanAndDiffusersAreBitExact) {
  TempDir dir;
  const ModelConfig c = with_attention(small_config(), "dsa", {3, 3, 3});
  const ParamTable table(c);
  std::vector<float> params(size_t(table.total()));
  init_params(table, c.dim, 5, params.data());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& p : params) p += 0.01f * normal(rng);  // offset_proj too: not zero
  std::vector<uint16_t> bf16(params.size());
  for (size_t i = 0; i < params.size(); ++i) bf16[i] = f32_to_bf16(params[i]);
  std::vector<TensorRef> refs;
  for (const ParamInfo& p : table.params()) refs.push_back({p.name, DType::bf16, p.shape, bf16.data() + p.offset});
  const std::string src = dir.file("src");
  fs::create_directories(src);
  write_model_files(src, SaveFormat::megaslide, c, refs);
  const auto original = tensor_bytes(src);

  const std::string d = dir.file("diffusers"), w = dir.file("wan"), m = dir.file("back");
  CliResult r = run_cli("convert " + src + " " + d + " --to diffusers --shard-size 20KB");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("dense"), std::string::npos) << r.output;  // the DSA model's export warning
  EXPECT_TRUE(fs::exists(d + "/transformer/diffusion_pytorch_model.safetensors.index.json"));  // sharded
  int shards = 0;
  for (const auto& e : fs::directory_iterator(d + "/transformer"))
    shards += e.path().filename().string().starts_with("diffusion_pytorch_model-0000");
  EXPECT_GE(shards, 2);
  EXPECT_TRUE(fs::exists(cat(d, "/transformer/diffusion_pytorch_model-00001-of-0000", shards, ".safetensors")));
  EXPECT_EQ(tensor_bytes(d + "/transformer"), original);
  r = run_cli("convert " + d + " " + w + " --to wan");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(w + "/diffusion_pytorch_model.safetensors"));
  EXPECT_EQ(tensor_bytes(w + "/diffusion_pytorch_model.safetensors"), original);
  r = run_cli("convert " + w + " " + m + " --to megaslide");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(tensor_bytes(m), original);
  EXPECT_EQ(config_to_json(load_config(m + "/config.json")), config_to_json(c));

  // Every layout loads into the same parameters.
  std::vector<float> a(params.size()), b(params.size());
  load_params(resolve_model(src, ""), table, 9, a.data());
  for (const std::string& where : {d, d + "/transformer", w, m}) {
    load_params(resolve_model(where, ""), table, 9, b.data());
    EXPECT_EQ(a, b) << where;
  }
  // --dtype converts; OUT is never overwritten; a trailing slash names the same OUT.
  r = run_cli("convert " + src + " " + dir.file("f32") + "/ --to megaslide --dtype f32");
  ASSERT_EQ(r.code, 0) << r.output;
  load_params(resolve_model(dir.file("f32"), ""), table, 9, b.data());
  EXPECT_EQ(a, b);
  // Converted tensors, made one at a time as the shards are written: every shard holds them in the new dtype.
  r = run_cli("convert " + src + " " + dir.file("f32-shards") + " --to diffusers --dtype f32 --shard-size 20KB");
  ASSERT_EQ(r.code, 0) << r.output;
  int f32_shards = 0;
  for (const auto& e : fs::directory_iterator(dir.file("f32-shards") + "/transformer")) {
    if (e.path().extension() != ".safetensors") continue;
    ++f32_shards;
    const SafetensorsFile shard = SafetensorsFile::open(e.path().string());
    for (const TensorEntry& t : shard.entries()) EXPECT_EQ(t.dtype, DType::f32) << e.path() << " " << t.name;
  }
  EXPECT_GT(f32_shards, shards) << "twice the bytes in shards of the same size";
  load_params(resolve_model(dir.file("f32-shards"), ""), table, 9, b.data());
  EXPECT_EQ(a, b);
  r = run_cli("convert " + src + " " + w + " --to wan");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("not an empty directory"), std::string::npos) << r.output;
}

TEST(Convert, TrainSavesWanAndDiffusersFilesBesideItsCheckpoint) {
  TempDir dir;
  const std::string out = dir.file("run");
  CliResult r = run_cli(
      "train --model tiny --steps 1 --frames 1 --height 8 --width 8 --batch-size 1 --save-format wan --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path step = fs::path(out) / "latest";
  EXPECT_TRUE(fs::exists(step / "diffusion_pytorch_model.safetensors"));
  EXPECT_TRUE(fs::equivalent(step / "diffusion_pytorch_model.safetensors", step / "model.safetensors"));  // a hard link
  const std::string out2 = dir.file("run2");
  r = run_cli(
      "train --model tiny --steps 1 --frames 1 --height 8 --width 8 --batch-size 1 --save-format diffusers --out " +
      out2);
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path step2 = fs::path(out2) / "latest";
  EXPECT_EQ(tensor_bytes((step2 / "transformer").string()), tensor_bytes((step2 / "model.safetensors").string()));
  EXPECT_EQ(config_to_json(load_config((step2 / "transformer" / "config.json").string())),
            config_to_json(load_config((step2 / "config.json").string())));
  // A resumed run keeps its format: the next checkpoint has the diffusers files too.
  r = run_cli("train --steps 2 --resume " + out2);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(out2) / "step-00000002" / "transformer" / "config.json"));
}

}  // namespace
}  // namespace ms::test
