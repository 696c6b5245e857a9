#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "model/config.h"

namespace ms::test {
namespace {

nlohmann::json wan13b() {  // Wan2.1-T2V-1.3B's config.json as released
  return nlohmann::json::parse(R"({"_class_name": "WanModel", "_diffusers_version": "0.30.0", "dim": 1536,
    "eps": 1e-06, "ffn_dim": 8960, "freq_dim": 256, "in_dim": 16, "model_type": "t2v", "num_heads": 12,
    "num_layers": 30, "out_dim": 16, "text_len": 512})");
}

void expect_config_rejected(nlohmann::json j, const std::string& key) {
  try {
    config_from_json(j, "c.json");
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Config, ReleasedWanConfigLoads) {
  ModelConfig c = config_from_json(wan13b(), "c.json");
  EXPECT_EQ(c.dim, 1536);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.text_dim, 4096);
  EXPECT_EQ(c.patch_size, (std::array<int64_t, 3>{1, 2, 2}));
}

// Found by fuzz/fuzz_config: a float too large for int64 reached nlohmann's conversion (undefined behaviour).
TEST(Config, NumbersMustHaveTheirExactTypeAndSize) {
  auto with = [](const char* key, nlohmann::json v) {
    auto j = wan13b();
    j[key] = v;
    return j;
  };
  expect_config_rejected(with("dim", 9.6e20), "dim");
  expect_config_rejected(with("dim", 1536.5), "dim");
  expect_config_rejected(with("num_layers", nlohmann::json::parse("18446744073709551615")), "num_layers");
  expect_config_rejected(with("patch_size", {1, 2, 2.0}), "patch_size");
  expect_config_rejected(with("patch_size", {1, 2}), "patch_size");
  expect_config_rejected(with("eps", "tiny"), "eps");
  auto j = wan13b();
  j["attention"] = {{"type", "dsa"}, {"window", {3, 3}}};
  expect_config_rejected(j, "window");
}

}  // namespace ms::test
