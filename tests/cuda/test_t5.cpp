// The umT5 encoder on the GPU (backend/cuda/t5_encoder.h) against the tests' float64 encoder (t5_reference.h), and
// its biased softmax kernel against plain loops. Skipped without a GPU.
#include <cmath>

#include "backend/cpu/t5_encoder.h"
#include "backend/cuda/t5_attention.h"
#include "backend/cuda/t5_encoder.h"
#include "core/rng.h"
#include "cuda_util.h"
#include "t5_reference.h"

namespace ms::test {
namespace {

// Every row of p against softmax_j(s + table[bucket(j - i), h]) in float64, on odd sizes: 3 heads, 37 keys (past
// the exact buckets), and a table of distinct values so that a wrong bucket or head shows.
TEST(CudaT5, BiasedSoftmaxMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  const int64_t H = 3, L = 37, nb = 8;
  std::vector<float> s = to_f32(randn(size_t(H * L * L), 1, 2.0)), table = to_f32(randn(size_t(nb * H), 2, 1.5));
  const std::vector<int64_t> b64 = t5_offset_buckets(L, nb);
  const std::vector<int32_t> bucket(b64.begin(), b64.end());
  std::vector<double> want(s.size());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      double* row = want.data() + (h * L + i) * L;
      double mx = -INFINITY, z = 0;
      for (int64_t j = 0; j < L; ++j) {
        row[j] = double(s[size_t((h * L + i) * L + j)]) + double(table[size_t(t5_bucket64(j - i, nb) * H + h)]);
        mx = std::max(mx, row[j]);
      }
      for (int64_t j = 0; j < L; ++j) z += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j < L; ++j) row[j] /= z;
    }
  DeviceBuffer<float> gs(s), gt(table);
  DeviceBuffer<int32_t> gb(bucket);
  DeviceBuffer<uint16_t> gp(H * L * L, 0x7fc0);  // NaN poison: every element must be written
  cuda::t5_bias_softmax(gs.get(), gb.get(), gt.get(), gp.get(), H, L, nullptr);
  expect_close("p", widen(gp.read()), want, kBf16Tol);
}

// The whole encoder on random configs (per-layer and shared tables, dim_attn above and below dim, L past the clamped
// distance 128 and L = text_len, one token) against float64 loops. The residual stream is fp32, but every sublayer's
// input, q, k, v, the probabilities and the FFN's hidden rows are rounded to bf16 (2^-9 relative each): 1e-2 leaves
// room for a few such roundings per layer; a wrong term is off by order one.
TEST(CudaT5, EncoderMatchesFloat64Loops) {
  MS_REQUIRE_GPU();
  struct Case {
    T5Config c;
    int64_t L;
  };
  T5Config a;
  a.vocab = 53, a.dim = 40, a.dim_attn = 36, a.dim_ffn = 56, a.num_heads = 6, a.num_layers = 2, a.text_len = 200;
  T5Config b = a;
  b.shared_pos = true, b.num_buckets = 16, b.dim_attn = 48, b.num_heads = 4, b.num_layers = 3, b.text_len = 23;
  for (const auto& [c, L] : {Case{a, 140}, Case{b, 23}, Case{a, 1}}) {
    SCOPED_TRACE("L " + std::to_string(L));
    const auto w = T5Weights::random(c, uint64_t(L) + 3);
    std::vector<int64_t> ids;
    Rng rng(uint64_t(L) + 11);
    for (int64_t i = 0; i < L; ++i) ids.push_back(int64_t(rng.next_u64() % uint64_t(c.vocab)));
    cuda::T5Encoder gpu(w);
    expect_close("context L" + std::to_string(L), gpu.encode(w, ids),
                 t5_reference(w, ids, std::vector<bool>(size_t(L), true)), 1e-2);
  }
}

// What the GPU cannot hold is refused before anything is allocated, naming the bytes and the way out; an id outside
// the vocabulary is t5_encode's error.
TEST(CudaT5, WhatDoesNotFitAndBadIdsAreClearErrors) {
  MS_REQUIRE_GPU();
  T5Config c;
  c.vocab = 11, c.dim = 8, c.dim_attn = 8, c.dim_ffn = 8, c.num_heads = 2, c.num_layers = 1, c.text_len = 1 << 20;
  const auto w = T5Weights::random(c, 5);
  const std::string e = error_of([&] { cuda::T5Encoder gpu(w); });
  EXPECT_NE(e.find("for a 1048576-token prompt"), std::string::npos) << e;
  EXPECT_NE(e.find("--backend cpu"), std::string::npos) << e;
  c.text_len = 4;
  const auto small = T5Weights::random(c, 6);
  cuda::T5Encoder gpu(small);
  const std::string e2 = error_of([&] { gpu.encode(small, {3, 11}); });
  EXPECT_NE(e2.find("token id 11 is outside the text encoder's vocabulary of 11"), std::string::npos) << e2;
}

}  // namespace
}  // namespace ms::test
