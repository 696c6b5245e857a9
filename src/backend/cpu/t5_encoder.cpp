#include "backend/cpu/t5_encoder.h"

#include <cmath>

#include "backend/cpu/gemm.h"
#include "backend/cpu/softmax_row.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/text.h"
#include "ops/activation.h"
#include "ops/rmsnorm.h"

namespace ms {
namespace {

constexpr int64_t kPanelFloats = 1 << 18;  // 1 MiB of widened weight rows per GEMM: stays in L2 while it is used

// y[L, out] = beta * y + x[L, in] W^T with W = the stored tensor `name` [out, in], widened panel by panel: every
// panel of rows is converted into a per-thread buffer and multiplied while it is cache-hot. Panels own disjoint
// columns of y, so they run in parallel and beta = 1 adds into a residual in place.
void stored_linear(const T5Weights& w, const std::string& name, const float* x, int64_t L, int64_t in, int64_t out,
                   float beta, float* y) {
  const int64_t rows = std::max<int64_t>(8, kPanelFloats / in / 8 * 8), panels = (out + rows - 1) / rows;
  parallel_for(panels, [&](int64_t p) {
    thread_local std::vector<float> panel;
    const int64_t r0 = p * rows, n = std::min(rows, out - r0);
    panel.resize(size_t(rows * in));
    w.read_rows(name, r0, n, panel.data());  // [n, in]
    cpu::gemm<float>(false, true, L, n, in, 1.0f, x, in, panel.data(), in, beta, y + r0, out);
  });
}

// x [L, dim] += Attn(h) for h = RMSNorm(x): heads in parallel, each with its own [L, L] scores.
// bucket [2L - 1]: the bucket of offset r = key - query at index r + L - 1; table [buckets, heads].
void attention(const T5Weights& w, const std::string& p, const std::vector<int64_t>& bucket,
               const std::vector<float>& table, const float* h, int64_t L, float* x) {
  const T5Config& c = w.config();
  const int64_t da = c.dim_attn, hd = c.head_dim(), H = c.num_heads;
  std::vector<float> q(size_t(L * da)), k(q.size()), v(q.size()), y(q.size());  // [L, da] each
  stored_linear(w, p + "attn.q.weight", h, L, c.dim, da, 0.0f, q.data());
  stored_linear(w, p + "attn.k.weight", h, L, c.dim, da, 0.0f, k.data());
  stored_linear(w, p + "attn.v.weight", h, L, c.dim, da, 0.0f, v.data());
  parallel_for(H, [&](int64_t head) {
    std::vector<float> s(size_t(L * L));  // [L query, L key]
    cpu::gemm<float>(false, true, L, L, hd, 1.0f, q.data() + head * hd, da, k.data() + head * hd, da, 0.0f, s.data(),
                     L);  // no 1/sqrt(hd): T5 folds it into the weights
    for (int64_t i = 0; i < L; ++i) {
      float* row = s.data() + i * L;
      for (int64_t j = 0; j < L; ++j) row[j] += table[size_t(bucket[size_t(j - i + L - 1)] * H + head)];
      const float mx = cpu::row_max(row, L, -INFINITY);
      const float inv = 1.0f / cpu::exp_affine(row, L, 1.0f, -mx);
      for (int64_t j = 0; j < L; ++j) row[j] *= inv;
    }
    cpu::gemm<float>(false, false, L, hd, L, 1.0f, s.data(), L, v.data() + head * hd, da, 0.0f, y.data() + head * hd,
                     da);
  });
  stored_linear(w, p + "attn.o.weight", y.data(), L, da, c.dim, 1.0f, x);
}

// x [L, dim] += fc2(fc1(h) * gelu_tanh(gate(h))) for h = RMSNorm(x).
void ffn(const T5Weights& w, const std::string& p, const float* h, int64_t L, float* x) {
  const T5Config& c = w.config();
  std::vector<float> g(size_t(L * c.dim_ffn)), f(g.size());  // [L, dim_ffn]
  stored_linear(w, p + "ffn.gate.0.weight", h, L, c.dim, c.dim_ffn, 0.0f, g.data());
  stored_linear(w, p + "ffn.fc1.weight", h, L, c.dim, c.dim_ffn, 0.0f, f.data());
  cpu::gelu_tanh_forward<float>({.x = g.data(), .y = g.data(), .n = int64_t(g.size())});
  for (size_t i = 0; i < g.size(); ++i) g[i] *= f[i];
  stored_linear(w, p + "ffn.fc2.weight", g.data(), L, c.dim_ffn, c.dim, 1.0f, x);
}

void rms_norm(const T5Weights& w, const std::string& name, const float* x, int64_t L, float* y) {
  const int64_t d = w.config().dim;
  std::vector<float> gain(static_cast<size_t>(d)), rstd(static_cast<size_t>(L));
  w.read(name, gain.data());
  cpu::rmsnorm_forward<float>(
      {.x = x, .w = gain.data(), .y = y, .rstd = rstd.data(), .N = L, .C = d, .eps = kT5NormEps});
}

}  // namespace

std::vector<float> t5_encode(const T5Weights& w, const std::vector<int64_t>& ids) {
  const T5Config& c = w.config();
  const int64_t L = int64_t(ids.size());
  std::vector<float> x = t5_embed(w, ids), h(x.size());  // [L, dim]
  const std::vector<int64_t> bucket = t5_offset_buckets(L, c.num_buckets);
  std::vector<float> table(size_t(c.num_buckets * c.num_heads));  // [buckets, heads]
  if (c.shared_pos) w.read("pos_embedding.embedding.weight", table.data());
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = cat("blocks.", layer, ".");
    if (!c.shared_pos) w.read(p + "pos_embedding.embedding.weight", table.data());
    rms_norm(w, p + "norm1.weight", x.data(), L, h.data());
    attention(w, p, bucket, table, h.data(), L, x.data());
    rms_norm(w, p + "norm2.weight", x.data(), L, h.data());
    ffn(w, p, h.data(), L, x.data());
  }
  rms_norm(w, "norm.weight", x.data(), L, h.data());
  check_t5_output(w, h);
  return h;
}

namespace {

class CpuT5Forward final : public T5Forward {
 public:
  std::vector<float> encode(const T5Weights& w, const std::vector<int64_t>& ids) override { return t5_encode(w, ids); }
};

}  // namespace

std::unique_ptr<T5Forward> cpu_t5_forward() { return std::make_unique<CpuT5Forward>(); }

}  // namespace ms
