// `megaslide forward [--backward]` end to end against the independent float64 reference.
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/resident_model.h"
#include "cli_util.h"
#include "io/safetensors.h"
#include "reference_model.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {

TEST(ForwardCli, MatchesReferenceAndGradientsMatchFloat64) {
  ModelConfig c;
  c.dim = 36;
  c.ffn_dim = 50;
  c.num_heads = 3;
  c.num_layers = 2;
  c.in_dim = 4;
  c.out_dim = 3;
  c.text_len = 9;
  c.text_dim = 13;
  c.freq_dim = 16;
  c.patch_size = {1, 2, 2};
  const int64_t B = 2, F = 3, H = 6, W = 4, Lc = 4;  // context shorter than text_len, batch > 1
  TempDir d;
  ParamTable table(c);
  Vec params = randn(size_t(table.total()), 21, 0.3);
  std::vector<float> pf(params.begin(), params.end());
  Weights weights;
  std::vector<TensorRef> refs;
  for (const auto& p : table.params()) {
    for (int64_t i = 0; i < p.numel; ++i) params[size_t(p.offset + i)] = pf[size_t(p.offset + i)];  // f32 exactly
    weights[p.name] = Vec(params.begin() + p.offset, params.begin() + p.offset + p.numel);
    refs.push_back({p.name, DType::f32, p.shape, pf.data() + p.offset});
  }
  write_safetensors(d.file("w.safetensors"), refs);
  std::ofstream(d.file("config.json")) << config_to_json(c).dump();
  auto lat = to_f32(randn(size_t(B * c.in_dim * F * H * W), 22)), ctx = to_f32(randn(size_t(B * Lc * c.text_dim), 23));
  auto dvel = to_f32(randn(size_t(B * c.out_dim * F * H * W), 24));
  std::vector<float> t{35.0f, 912.0f};  // different timesteps per sample
  write_safetensors(d.file("in.safetensors"), {{"latents", DType::f32, {B, c.in_dim, F, H, W}, lat.data()},
                                               {"timestep", DType::f32, {B}, t.data()},
                                               {"context", DType::f32, {B, Lc, c.text_dim}, ctx.data()},
                                               {"grad_velocity", DType::f32, {B, c.out_dim, F, H, W}, dvel.data()}});
  CliResult r =
      run_cli("forward --model " + d.file("w.safetensors") + " --config " + d.file("config.json") + " --inputs " +
              d.file("in.safetensors") + " --out " + d.file("out.safetensors") + " --backward");
  ASSERT_EQ(r.code, 0) << r.output;
  SafetensorsFile out = SafetensorsFile::open(d.file("out.safetensors"));
  auto get = [&](const std::string& name) {
    const TensorEntry* e = out.find(name);
    EXPECT_NE(e, nullptr) << name;
    std::vector<float> v(e ? size_t(numel(e->shape)) : 0);
    if (e) read_as_f32(*e, v.data());
    return v;
  };
  Vec latd(lat.begin(), lat.end()), ctxd(ctx.begin(), ctx.end()), td(t.begin(), t.end());
  Vec ref = ref_forward(c, weights, latd, td, ctxd, B, F, H, W, Lc);
  EXPECT_LT(rel_l2(get("velocity"), ref), 2e-4);  // the acceptance bound for the forward
  // gradients against the engine in float64 (itself checked against finite differences in test_model)
  ResidentModel<double> m(c, ModelDims::make(c, B, F, H, W, Lc));
  Vec vel(ref.size()), grads(params.size(), 0.0), dlat(latd.size()), dctx(ctxd.size()), dv(dvel.begin(), dvel.end());
  m.forward(params.data(), latd.data(), td.data(), ctxd.data(), vel.data());
  m.backward(params.data(), dv.data(), grads.data(), dlat.data(), dctx.data());
  EXPECT_LT(rel_l2(get("grad.latents"), dlat), 2e-3);
  EXPECT_LT(rel_l2(get("grad.context"), dctx), 2e-3);
  for (const auto& p : table.params()) {
    Vec g(grads.begin() + p.offset, grads.begin() + p.offset + p.numel);
    EXPECT_LT(rel_l2(get("grad." + p.name), g), 2e-3) << p.name;
  }
}

}  // namespace ms::test
