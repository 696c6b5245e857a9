// A small model with random parameters and inputs, its independent float64 reference, and the float64
// finite-difference check of every gradient ResidentModel::backward gives (test_model, test_model_attention).
#pragma once
#include <string>

#include "backend/cpu/resident_model.h"
#include "reference_model.h"
#include "small_config.h"
#include "test_util.h"

namespace ms::test {

struct ModelCase {
  ModelConfig cfg;
  ModelDims dims;
  ParamTable table;
  Vec params, latents, t, context;
  Weights weights;

  // B = 2 samples, latents [2, in_dim, F, H, W], context [2, Lc, text_dim]; parameters N(0, 0.4^2), norm
  // weights near 1 like trained models. t: one per sample, or `time_rows` per sample (one of them 0, as TI2V's
  // conditioning frame has it).
  ModelCase(const ModelConfig& c, int64_t F, int64_t H, int64_t W, int64_t Lc, int64_t time_rows = 1)
      : cfg(c), dims(ModelDims::make(c, 2, F, H, W, Lc, time_rows)), table(c), t{137.0, 861.5} {
    if (time_rows > 1) {
      Rng r(15);
      t.resize(size_t(dims.Bt()));
      for (double& v : t) v = r.uniform(0.0, 1000.0);
      t[0] = 0.0;
    }
    params = randn(size_t(table.total()), 11, 0.4);
    for (const auto& p : table.params()) {
      if (p.name.find("norm") != std::string::npos && p.name.find(".weight") != std::string::npos)
        for (int64_t i = 0; i < p.numel; ++i) params[size_t(p.offset + i)] += 1.0;
    }
    latents = randn(size_t(dims.B * cfg.in_dim * dims.F * dims.H * dims.W), 12);
    context = randn(size_t(dims.B * dims.Lc * cfg.text_dim), 13);
    for (const auto& p : table.params())
      weights[p.name] = Vec(params.begin() + p.offset, params.begin() + p.offset + p.numel);
  }
  int64_t out_numel() const { return dims.B * cfg.out_dim * dims.F * dims.H * dims.W; }
  // The reference takes t per token ([B, L], Wan2.2's form) when there are several per sample.
  Vec reference() const {
    Vec tt = t;
    if (dims.time_rows > 1) {
      tt.resize(size_t(dims.N()));
      for (int64_t n = 0; n < dims.N(); ++n) tt[size_t(n)] = t[size_t(n / dims.Lr())];
    }
    return ref_forward(cfg, weights, latents, tt, context, dims.B, dims.F, dims.H, dims.W, dims.Lc);
  }
};

// Float64 central differences of sum(velocity * r) against ResidentModel<double>::backward: latents and context
// (40 coordinates each) and `coords` coordinates of every parameter tensor.
inline void expect_gradients_match_fd(ModelCase& k, int coords = 6) {
  ResidentModel<double> m(k.cfg, k.dims);
  Vec r = randn(size_t(k.out_numel()), 14), out(r.size());
  auto loss = [&] {
    m.forward(k.params.data(), k.latents.data(), k.t.data(), k.context.data(), out.data());
    return dot(out, r);
  };
  loss();
  Vec grads(k.params.size(), 0.0), dlat(k.latents.size()), dctx(k.context.size());
  m.backward(k.params.data(), r.data(), grads.data(), dlat.data(), dctx.data());
  EXPECT_LT(fd_error(k.latents, dlat, loss, 40), kFdTol);
  EXPECT_LT(fd_error(k.context, dctx, loss, 40), kFdTol);
  for (const auto& p : k.table.params()) {
    Vec sub(k.params.begin() + p.offset, k.params.begin() + p.offset + p.numel);
    Vec gsub(grads.begin() + p.offset, grads.begin() + p.offset + p.numel);
    auto sub_loss = [&] {
      std::copy(sub.begin(), sub.end(), k.params.begin() + p.offset);
      return loss();
    };
    EXPECT_LT(fd_error(sub, gsub, sub_loss, coords), kFdTol) << p.name;
    std::copy(sub.begin(), sub.end(), k.params.begin() + p.offset);
  }
}

}  // namespace ms::test
