// The model's float64 references for the CUDA tests: the stage orchestration (model/*_impl.h) over CpuOps<double>
// with the GEMMs and attention as plain loops (RefOps), and random bf16 stage parameters.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "cuda_util.h"
#include "model/weights.h"
#include "reference_model.h"
#include "reference_ops.h"

namespace ms::test {

// Tokens i and j of a T x H x W grid attend to each other iff they share Video Swin's cell on every axis.
inline AttentionMask swin_mask(const VideoAttentionDims& d, const std::array<int64_t, 3>& window, bool shifted) {
  return [=](int64_t i, int64_t j) {
    const int64_t ci[3] = {i / (d.H * d.W), i / d.W % d.H, i % d.W}, cj[3] = {j / (d.H * d.W), j / d.W % d.H, j % d.W},
                  ext[3] = {d.T, d.H, d.W};
    for (int a = 0; a < 3; ++a)
      if (ref_swin_cell(ci[a], ext[a], window[size_t(a)], shifted) !=
          ref_swin_cell(cj[a], ext[a], window[size_t(a)], shifted))
        return false;
    return true;
  };
}

// DSA's offset network on the GPU against float64: its gradients are position gradients, which jump wherever a
// sample crosses an integer position, and the offsets are bf16 after a chain of bf16 ops (conv, GELU, offset_proj),
// which moves a few per cent of the samples across. In float64 with the GPU's bf16 roundings of that chain, a DSA
// block's offset-network gradients move by 7e-2 to 8e-2 and its dx by 7e-2; the emulated GPU (tools/cuda-emu) gave
// 8e-2 to 1e-1 and 7.5e-2: the block test allows 2e-1 and 1.5e-1. Through a whole step they are worse conditioned
// still: in float64 alone, weights moved by one bf16 rounding (2^-9 relative noise) move the offset networks'
// gradients by 0.28 to 0.57 (the other stages' by 0.015 to 0.04), and the emulated GPU's are 0.29 to 0.65 off. The
// step test allows 0.9 there: it still fails a zero gradient (1), a sign error (2) or an unrelated one (about 1.4),
// and the kernels themselves are held to bf16 tolerances in test_dsa.cpp.
inline bool in_offset_network(const std::string& param) { return param.find("self_attn.offset_") != std::string::npos; }
constexpr double kOffsetGradTol = 2e-1, kOffsetDxTol = 1.5e-1, kOffsetStepTol = 9e-1;

// CpuOps<double> with the GEMMs and attention as plain loops (the CPU kernels would need OpenBLAS): window attention
// as dense attention masked to Video Swin's cells. DSA and its offset network are CpuOps' own CPU kernels (plain
// loops and Highway, no OpenBLAS), checked against float64 finite differences in tests/test_dsa.cpp.
struct RefOps : CpuOps<double> {
  void linear_forward(const LinearParams<double>& p) { reference_linear_forward(p.x, p.w, p.b, p.y, p.N, p.in, p.out); }
  void linear_backward(const LinearParams<double>& p) {
    reference_linear_backward(p.x, p.w, p.dy, p.dx, p.dw, p.db, p.N, p.in, p.out);
  }
  // The time path's linear is the same layer in float64.
  void time_linear_forward(const LinearParams<double>& p) { linear_forward(p); }
  void time_linear_backward(const LinearParams<double>& p) { linear_backward(p); }
  void window_attention_forward(const WindowAttentionParams<double>& p) {
    forward(p.t, sequence(p.dims), swin_mask(p.dims, p.window, p.shifted));
  }
  void window_attention_backward(const WindowAttentionParams<double>& p) {
    backward(p.t, sequence(p.dims), swin_mask(p.dims, p.window, p.shifted));
  }
  void attention_forward(const AttentionParams<double>& p) { forward(p.t, p.dims); }
  void attention_backward(const AttentionParams<double>& p) { backward(p.t, p.dims); }

 private:
  static AttentionDims sequence(const VideoAttentionDims& d) { return {d.B, d.L(), d.L(), d.nh, d.d}; }
  static void forward(const AttentionTensors<double>& t, const AttentionDims& a,
                      const AttentionMask& allowed = nullptr) {
    const AttentionReference r = run(a, t.q, t.k, t.v, nullptr, nullptr, nullptr, nullptr, allowed);
    std::copy(r.out.begin(), r.out.end(), t.out);
    std::copy(r.lse.begin(), r.lse.end(), t.lse);
  }
  static void backward(const AttentionTensors<double>& t, const AttentionDims& a,
                       const AttentionMask& allowed = nullptr) {
    const AttentionReference r = run(a, t.q, t.k, t.v, t.dout, t.dq, t.dk, t.dv, allowed);
    std::copy(r.dq.begin(), r.dq.end(), t.dq);
    std::copy(r.dk.begin(), r.dk.end(), t.dk);
    std::copy(r.dv.begin(), r.dv.end(), t.dv);
  }
  // reference_attention on the arrays (null dout and gradients: zeros).
  static AttentionReference run(const AttentionDims& a, const double* q, const double* k, const double* v,
                                const double* dout, const double* dq, const double* dk, const double* dv,
                                const AttentionMask& allowed = nullptr) {
    const size_t nq = size_t(a.B * a.Lq * a.nh * a.d), nk = size_t(a.B * a.Lk * a.nh * a.d);
    auto vec = [](const double* p, size_t n) { return p ? std::vector<double>(p, p + n) : std::vector<double>(n); };
    return reference_attention(a, vec(q, nq), vec(k, nk), vec(v, nk), vec(dout, nq), vec(dq, nq), vec(dk, nk),
                               vec(dv, nk), allowed);
  }
};

// Parameters of one stage (visit: visit_block, visit_stem or visit_head bound to the config): N(0, 0.4^2), norm
// weights near 1 like trained models; rounded to bf16.
template <class W, class Visit>
Bf16Input stage_weights(Visit&& visit, uint64_t seed) {
  int64_t count = 0;
  W fields{};
  visit(fields, [&](const std::string&, const Shape& s, auto&) { count += numel(s); });
  Bf16Input w = random_bf16(size_t(count), seed, 0.4);
  int64_t offset = 0;
  visit(fields, [&](const std::string& name, const Shape& s, auto&) {
    if (name.find("norm") != std::string::npos && name.find(".weight") != std::string::npos)
      for (int64_t i = offset; i < offset + numel(s); ++i) {
        w.bits[size_t(i)] = f32_to_bf16(float(w.values[size_t(i)] + 1.0));
        w.values[size_t(i)] = double(bf16_to_f32(w.bits[size_t(i)]));
      }
    offset += numel(s);
  });
  return w;
}

}  // namespace ms::test
