#include "ops/window_attention.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace ms::cpu {
namespace {

// The cells of one axis: [o + m*k, o + (m+1)*k) clipped to [0, E), m in [0, n).
struct AxisCells {
  int64_t E, k, o, n;
  AxisCells(int64_t extent, int64_t window, bool shifted) : E(extent), k(std::min(window, extent)) {
    MS_CHECK(window > 0, "window attention: window size ", window);
    const int64_t s = (shifted && window < E) ? k / 2 : 0;
    o = s > 0 ? s - k : 0;
    n = (E - o + k - 1) / k;
  }
  int64_t begin(int64_t m) const { return std::max<int64_t>(0, o + m * k); }
  int64_t end(int64_t m) const { return std::min(E, o + (m + 1) * k); }
};

// Calls fn(b, toks, n) for every (sample, cell) in parallel, toks [n] the cell's token indices in grid order.
template <class F>
void for_each_cell(const VideoAttentionDims& d, const std::array<int64_t, 3>& window, bool shifted, F&& fn) {
  const AxisCells ct(d.T, window[0], shifted), ch(d.H, window[1], shifted), cw(d.W, window[2], shifted);
  const int64_t ncells = ct.n * ch.n * cw.n;
  const double work = 4.0 * double(d.B * d.L() * d.nh * d.d) * double(ct.k * ch.k * cw.k);  // ~4 GEMMs per cell
  parallel_for(
      d.B * ncells,
      [&](int64_t task) {
        const int64_t b = task / ncells, cell = task % ncells;
        const int64_t mt = cell / (ch.n * cw.n), mh = (cell / cw.n) % ch.n, mw = cell % cw.n;
        std::vector<int64_t> toks;  // [n]
        for (int64_t t = ct.begin(mt); t < ct.end(mt); ++t)
          for (int64_t h = ch.begin(mh); h < ch.end(mh); ++h)
            for (int64_t w = cw.begin(mw); w < cw.end(mw); ++w) toks.push_back((t * d.H + h) * d.W + w);
        fn(b, toks.data(), int64_t(toks.size()));
      },
      min_parallel_for_work(d.B * ncells, work));
}

// dst [n, ld] = rows toks of src [L, ld] (one batch sample).
template <class T>
std::vector<T> gather(const T* src, const int64_t* toks, int64_t n, int64_t ld) {
  std::vector<T> dst(size_t(n * ld));
  for (int64_t i = 0; i < n; ++i) std::copy(src + toks[i] * ld, src + (toks[i] + 1) * ld, dst.begin() + i * ld);
  return dst;
}

}  // namespace

template <class T>
void window_attention_forward(const WindowAttentionParams<T>& p) {
  const T *q = p.t.q, *k = p.t.k, *v = p.t.v;
  T *out = p.t.out, *lse = p.t.lse;
  const VideoAttentionDims& dims = p.dims;
  const int64_t L = dims.L(), nh = dims.nh, d = dims.d, ld = nh * d;
  for_each_cell(dims, p.window, p.shifted, [&](int64_t b, const int64_t* toks, int64_t n) {
    const int64_t s0 = b * L * ld;  // first row of sample b
    const auto qc = gather(q + s0, toks, n, ld), kc = gather(k + s0, toks, n, ld), vc = gather(v + s0, toks, n, ld);
    std::vector<T> oc(size_t(n * ld)), lc(size_t(nh * n));  // cell output [n, nh, d], lse [nh, n]
    for (int64_t h = 0; h < nh; ++h)
      attention_forward_head(qc.data() + h * d, kc.data() + h * d, vc.data() + h * d, oc.data() + h * d,
                             lc.data() + h * n, n, n, d, ld);
    for (int64_t i = 0; i < n; ++i) {
      std::copy(oc.begin() + i * ld, oc.begin() + (i + 1) * ld, out + s0 + toks[i] * ld);
      for (int64_t h = 0; h < nh; ++h) lse[(b * nh + h) * L + toks[i]] = lc[size_t(h * n + i)];
    }
  });
}

template <class T>
void window_attention_backward(const WindowAttentionParams<T>& p) {
  const T *q = p.t.q, *k = p.t.k, *v = p.t.v, *out = p.t.out, *lse = p.t.lse, *dout = p.t.dout;
  T *dq = p.t.dq, *dk = p.t.dk, *dv = p.t.dv;
  const VideoAttentionDims& dims = p.dims;
  const int64_t L = dims.L(), nh = dims.nh, d = dims.d, ld = nh * d;
  for_each_cell(dims, p.window, p.shifted, [&](int64_t b, const int64_t* toks, int64_t n) {
    const int64_t s0 = b * L * ld;
    const auto qc = gather(q + s0, toks, n, ld), kc = gather(k + s0, toks, n, ld), vc = gather(v + s0, toks, n, ld);
    const auto oc = gather(out + s0, toks, n, ld), doc = gather(dout + s0, toks, n, ld);
    std::vector<T> lc(size_t(nh * n));  // [nh, n]
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < n; ++i) lc[size_t(h * n + i)] = lse[(b * nh + h) * L + toks[i]];
    std::vector<T> dqc(size_t(n * ld)), dkc(size_t(n * ld)), dvc(size_t(n * ld));  // [n, nh, d], zero
    for (int64_t h = 0; h < nh; ++h)
      attention_backward_head(qc.data() + h * d, kc.data() + h * d, vc.data() + h * d, oc.data() + h * d,
                              lc.data() + h * n, doc.data() + h * d, dqc.data() + h * d, dkc.data() + h * d,
                              dvc.data() + h * d, n, n, d, ld);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < ld; ++c) {
        const int64_t at = s0 + toks[i] * ld + c;
        dq[at] += dqc[size_t(i * ld + c)];
        dk[at] += dkc[size_t(i * ld + c)];
        dv[at] += dvc[size_t(i * ld + c)];
      }
  });
}

#define MS_INSTANTIATE(T)                                                     \
  template void window_attention_forward<T>(const WindowAttentionParams<T>&); \
  template void window_attention_backward<T>(const WindowAttentionParams<T>&);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms::cpu
