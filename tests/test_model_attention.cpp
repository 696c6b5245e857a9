// The model with each local self-attention type of docs/attention.md (window, dsa, dsa_fixed): forward against the
// independent reference, float64 finite differences for every gradient, DSA's parameters and initialisation.
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "model/init.h"
#include "model_case.h"

namespace ms::test {
namespace {

// Two blocks so that block 1 shifts its windows; G = 1 < 2 heads for dsa; windows not dividing the 3 x 3 x 4 grid.
ModelConfig attention_config(const std::string& type) {
  ModelConfig c = small_config();
  c.attention.type = parse_name<AttentionType>(type, "test");
  c.attention.window = type == "window" ? std::array<int64_t, 3>{2, 2, 3} : std::array<int64_t, 3>{2, 3, 2};
  c.attention.shift = true;
  c.attention.offset_groups = 1;
  c.attention.offset_range = {1.0, 1.5, 2.0};
  c.validate();
  return c;
}

// Token grid 3 x 3 x 4. Random parameters include offset_proj, so DSA's offsets are far from zero.
ModelCase attention_case(const std::string& type) { return ModelCase(attention_config(type), 3, 6, 8, 5); }

Vec forward(const ModelCase& k, const Vec& params) {
  ResidentModel<double> m(k.cfg, k.dims);
  Vec out(size_t(k.out_numel()));
  m.forward(params.data(), k.latents.data(), k.t.data(), k.context.data(), out.data());
  return out;
}

// params of case `k` laid out for `to`'s table, by name (parameters `to` lacks are dropped).
Vec params_by_name(const ModelCase& k, const ParamTable& to) {
  Vec out(size_t(to.total()));
  for (const auto& p : to.params())
    std::copy(k.weights.at(p.name).begin(), k.weights.at(p.name).end(), out.begin() + p.offset);
  return out;
}

}  // namespace

TEST(ModelAttention, ForwardMatchesIndependentReference) {
  for (const char* type : {"window", "dsa", "dsa_fixed"}) {
    ModelCase k = attention_case(type);
    const Vec ref = k.reference();
    EXPECT_LT(rel_l2(forward(k, k.params), ref), 1e-12) << type;
    ResidentModel<float> mf(k.cfg, k.dims);
    auto pf = to_f32(k.params), lf = to_f32(k.latents), tf = to_f32(k.t), cf = to_f32(k.context);
    std::vector<float> outf(ref.size());
    mf.forward(pf.data(), lf.data(), tf.data(), cf.data(), outf.data());
    EXPECT_LT(rel_l2(outf, ref), 2e-4) << type;
  }
}

TEST(ModelAttention, WindowGradientsMatchFiniteDifferences) {
  ModelCase k = attention_case("window");
  expect_gradients_match_fd(k);
}

TEST(ModelAttention, DsaGradientsMatchFiniteDifferences) {
  ModelCase k = attention_case("dsa");
  expect_gradients_match_fd(k);
}

TEST(ModelAttention, DsaFixedGradientsMatchFiniteDifferences) {
  ModelCase k = attention_case("dsa_fixed");
  expect_gradients_match_fd(k);
}

// The learned offsets change the output; with the Wan initialisation (offset_proj zero) DSA is exactly dsa_fixed.
TEST(ModelAttention, DsaStartsAsDsaFixed) {
  ModelCase dsa = attention_case("dsa"), fixed = attention_case("dsa_fixed");
  EXPECT_GT(rel_l2(forward(dsa, dsa.params), forward(fixed, params_by_name(dsa, fixed.table))), 1e-3);
  std::vector<float> init(size_t(dsa.table.total()));
  init_params(dsa.table, dsa.cfg.dim, 3, init.data());
  for (const auto& p : dsa.table.params())
    dsa.weights[p.name] = Vec(init.begin() + p.offset, init.begin() + p.offset + p.numel);
  const Vec a = forward(dsa, Vec(init.begin(), init.end())), b = forward(fixed, params_by_name(dsa, fixed.table));
  EXPECT_EQ(a, b);
  const ParamInfo* conv = dsa.table.find("blocks.1.self_attn.offset_conv.weight");
  double mx = 0;  // Conv3d's default: U(+-1/sqrt(27)) = U(+-0.192)
  for (int64_t i = 0; i < conv->numel; ++i) mx = std::max(mx, std::fabs(double(init[size_t(conv->offset + i)])));
  EXPECT_GT(mx, 0.15);
  EXPECT_LT(mx, 0.1925);
}

// Only dsa adds parameters: four per block, named and shaped as docs/attention.md says.
TEST(ModelAttention, DsaAddsTheOffsetNetworkParameters) {
  const ModelConfig dense = preset_config("wan2.1-1.3b");
  for (const char* type : {"window", "dsa_fixed"}) {
    ModelConfig c = dense;
    c.attention.type = parse_name<AttentionType>(type, "test");
    EXPECT_EQ(ParamTable(c).total(), ParamTable(dense).total()) << type;
  }
  ModelConfig c = dense;
  c.attention.type = AttentionType::dsa;
  c.attention.offset_groups = 4;
  const ParamTable t(c);
  const int64_t D = c.dim, M = 4 * 27 * 3;
  EXPECT_EQ(t.total(), ParamTable(dense).total() + c.num_layers * (D * 27 + D + M * D + M));
  EXPECT_EQ(t.find("blocks.7.self_attn.offset_conv.weight")->shape, (Shape{D, 1, 3, 3, 3}));
  EXPECT_EQ(t.find("blocks.7.self_attn.offset_conv.bias")->shape, (Shape{D}));
  EXPECT_EQ(t.find("blocks.7.self_attn.offset_proj.weight")->shape, (Shape{M, D}));
  EXPECT_EQ(t.find("blocks.7.self_attn.offset_proj.bias")->shape, (Shape{M}));
}

TEST(ModelAttention, ConfigRejectsBadAttentionValues) {
  auto message = [](auto&& edit) {
    ModelConfig c = attention_config("dsa");
    edit(c.attention);
    try {
      c.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([](AttentionConfig& a) { a.window[1] = 0; }).find("attention.window[1] (h) is 0"),
            std::string::npos);
  EXPECT_NE(message([](AttentionConfig& a) { a.offset_range[2] = 0; }).find("offset_range[2] (w) is 0"),
            std::string::npos);
  EXPECT_NE(message([](AttentionConfig& a) { a.offset_range[0] = -1; }).find("is -1"), std::string::npos);
  EXPECT_NE(message([](AttentionConfig& a) { a.offset_groups = 3; }).find("offset_groups 3 must divide num_heads 2"),
            std::string::npos);
  EXPECT_EQ(message([](AttentionConfig& a) {
              a.type = AttentionType::dsa_fixed, a.offset_range = {0, 0, 0};
            }),
            "no error");
  // An unknown type is refused where it is parsed, naming it and the choices.
  nlohmann::json j = config_to_json(attention_config("dsa"));
  j["attention"]["type"] = "swin";
  std::string what = "no error";
  try {
    config_from_json(j, "c.json");
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("c.json: attention.type 'swin' is unknown; use dense, window, dsa or dsa_fixed"),
            std::string::npos)
      << what;
}

}  // namespace ms::test
