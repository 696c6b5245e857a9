#include "backend/cpu/resident_model.h"
#include "model/init.h"
#include "model_case.h"

namespace ms::test {
namespace {

// The shapes every test below uses: token grid 3 x 2 x 3, context shorter than text_len.
ModelCase small_case() { return ModelCase(small_config(), 3, 4, 6, 5); }

}  // namespace

TEST(ParamTable, Wan14BCountIsExact) {
  EXPECT_EQ(ParamTable(preset_config("wan2.1-14b")).total(), 14288491584);
  ParamTable t(preset_config("wan2.1-1.3b"));
  EXPECT_EQ(t.stages().size(), 32u);  // stem, 30 blocks, head
  int64_t sum = 0;
  for (const auto& s : t.stages()) sum += s.numel;
  EXPECT_EQ(sum, t.total());
}

TEST(Model, ForwardMatchesIndependentReference) {
  ModelCase k = small_case();
  Vec ref = k.reference();
  ResidentModel<double> m(k.cfg, k.dims);
  Vec out(size_t(k.out_numel()));
  m.forward(k.params.data(), k.latents.data(), k.t.data(), k.context.data(), out.data());
  EXPECT_LT(rel_l2(out, ref), 1e-12);
  // float32 engine against the float64 reference: the acceptance bound of `megaslide forward`
  ResidentModel<float> mf(k.cfg, k.dims);
  auto pf = to_f32(k.params), lf = to_f32(k.latents), tf = to_f32(k.t), cf = to_f32(k.context);
  std::vector<float> outf(out.size());
  mf.forward(pf.data(), lf.data(), tf.data(), cf.data(), outf.data());
  EXPECT_LT(rel_l2(outf, ref), 2e-4);
}

TEST(Model, GradientsMatchFiniteDifferences) {
  ModelCase k = small_case();
  expect_gradients_match_fd(k);
}

TEST(Model, WanInitIsDeterministicAndHeadStartsAtZero) {
  ModelConfig c = small_config();
  ParamTable t(c);
  std::vector<float> a(size_t(t.total())), b(a.size());
  init_params(t, c.dim, 5, a.data());
  init_params(t, c.dim, 5, b.data());
  EXPECT_EQ(a, b);
  const ParamInfo* head = t.find("head.head.weight");
  for (int64_t i = 0; i < head->numel; ++i) EXPECT_EQ(a[size_t(head->offset + i)], 0.0f);
  const ParamInfo* q = t.find("blocks.1.self_attn.q.weight");  // Xavier-uniform bound sqrt(6 / (24 + 24)) = 0.354
  double mx = 0;
  for (int64_t i = 0; i < q->numel; ++i) mx = std::max(mx, double(std::fabs(a[size_t(q->offset + i)])));
  EXPECT_LT(mx, 0.3536);
  EXPECT_GT(mx, 0.3);
}

}  // namespace ms::test
