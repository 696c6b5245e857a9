#include <nlohmann/json.hpp>

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

// Every Wan preset's count from Wan's modules (model.py: Linear weights and biases, the affine norm3 and the
// q/k RMSNorms, the blocks' 6 and the head's 2 modulation rows; norm1, norm2 and the head's norm carry none).
TEST(ParamTable, WanPresetsCountWhatWansModulesHold) {
  auto wan_count = [](int64_t D, int64_t F, int64_t layers, int64_t in, int64_t out) {
    const int64_t block = 8 * (D * D + D) + 4 * D + 2 * D + (D * F + F) + (F * D + D) + 6 * D;
    return (in * 4 * D + D) + (4096 * D + D) + (D * D + D) + (256 * D + D) + (D * D + D) + (6 * D * D + 6 * D) +
           layers * block + (D * out * 4 + out * 4) + 2 * D;
  };
  EXPECT_EQ(ParamTable(preset_config("wan2.1-t2v-1.3b")).total(), wan_count(1536, 8960, 30, 16, 16));
  EXPECT_EQ(ParamTable(preset_config("wan2.1-t2v-14b")).total(), wan_count(5120, 13824, 40, 16, 16));
  EXPECT_EQ(ParamTable(preset_config("wan2.2-t2v-a14b")).total(), wan_count(5120, 13824, 40, 16, 16));
  EXPECT_EQ(ParamTable(preset_config("wan2.2-ti2v-5b")).total(), wan_count(3072, 14336, 30, 48, 48));
  // the names before Wan2.2 stay
  EXPECT_EQ(config_to_json(preset_config("wan2.1-1.3b")), config_to_json(preset_config("wan2.1-t2v-1.3b")));
  EXPECT_EQ(config_to_json(preset_config("wan2.1-14b")), config_to_json(preset_config("wan2.1-t2v-14b")));
  EXPECT_EQ(preset_config("wan2.2-ti2v-5b").model_type, "ti2v");
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

// Wan2.2's per-token timesteps (t [B, L]) as megaslide runs them, one per latent frame: the forward against the
// reference's per-token time embedding and modulation, the gradients against finite differences.
TEST(Model, PerFrameTimestepsMatchPerTokenReference) {
  ModelCase k(small_config(), 3, 4, 6, 5, 3);
  ASSERT_EQ(k.t.size(), 6u);
  Vec ref = k.reference();
  ResidentModel<double> m(k.cfg, k.dims);
  Vec out(size_t(k.out_numel()));
  m.forward(k.params.data(), k.latents.data(), k.t.data(), k.context.data(), out.data());
  EXPECT_LT(rel_l2(out, ref), 1e-12);
  // the frames' timesteps matter: the same clip at one timestep per sample differs
  ModelCase one = k;
  one.dims = ModelDims::make(k.cfg, 2, 3, 4, 6, 5);
  one.t = {k.t[0], k.t[3]};
  EXPECT_GT(rel_l2(out, one.reference()), 1e-3);
  expect_gradients_match_fd(k);
}

// One timestep per frame, all equal to the sample's: Wan2.1's forward (the time path's GEMMs run on 6 rows instead
// of 2, which may change their rounding: float32 equal to 1e-6).
TEST(Model, EqualPerFrameTimestepsAreTheSampleTimestep) {
  ModelCase k = small_case(), per_frame(small_config(), 3, 4, 6, 5, 3);
  per_frame.t = {k.t[0], k.t[0], k.t[0], k.t[1], k.t[1], k.t[1]};
  ResidentModel<float> m(k.cfg, k.dims), mf(k.cfg, per_frame.dims);
  auto pf = to_f32(k.params), lf = to_f32(k.latents), cf = to_f32(k.context), t1 = to_f32(k.t), t3 = to_f32(per_frame.t);
  std::vector<float> oa(size_t(k.out_numel())), ob(oa.size());
  m.forward(pf.data(), lf.data(), t1.data(), cf.data(), oa.data());
  mf.forward(pf.data(), lf.data(), t3.data(), cf.data(), ob.data());
  EXPECT_LT(rel_l2(ob, std::vector<double>(oa.begin(), oa.end())), 1e-6);
}

// One workspace laid out for several step shapes (buckets) runs each, and each at a smaller batch, bit for bit as a
// model laid out for that shape alone, whatever ran before it.
TEST(Model, OneLayoutForSeveralShapesRunsEachAsItsOwn) {
  ModelCase a = small_case(), b(small_config(), 1, 6, 8, 5);
  ModelDims a1 = a.dims;  // shape a at one clip
  a1.B = 1;
  ResidentModel<double> shared(a.cfg, StepShapes({a.dims, b.dims}));
  struct Run {
    const ModelCase& k;
    ModelDims d;
  };
  for (const Run& r : {Run{a, a.dims}, Run{b, b.dims}, Run{a, a1}, Run{a, a.dims}}) {
    ResidentModel<double> own(r.k.cfg, r.d);
    const int64_t out_numel = r.d.B * r.k.cfg.out_dim * r.d.F * r.d.H * r.d.W;
    Vec want(static_cast<size_t>(out_numel)), got(want.size()), dv = randn(want.size(), 5);
    Vec gwant(r.k.params.size(), 0.0), ggot(gwant.size(), 0.0);
    Vec lwant(size_t(r.d.B * r.k.cfg.in_dim * r.d.F * r.d.H * r.d.W)), lgot(lwant.size());
    own.forward(r.k.params.data(), r.k.latents.data(), r.k.t.data(), r.k.context.data(), want.data());
    own.backward(r.k.params.data(), dv.data(), gwant.data(), lwant.data(), nullptr);
    shared.set_dims(r.d);
    shared.forward(r.k.params.data(), r.k.latents.data(), r.k.t.data(), r.k.context.data(), got.data());
    shared.backward(r.k.params.data(), dv.data(), ggot.data(), lgot.data(), nullptr);
    EXPECT_EQ(got, want) << r.d.B << " x " << r.d.F << "x" << r.d.H << "x" << r.d.W;
    EXPECT_EQ(ggot, gwant);
    EXPECT_EQ(lgot, lwant);
  }
  ModelDims wider = b.dims;
  wider.W += 2;
  EXPECT_THROW(shared.set_dims(wider), Error);  // not one of the shapes
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
