// `megaslide op dense|window|dsa`: one self-attention operator on tensors from a safetensors file (docs/formats.md), to
// cross-check the kernels against other implementations (e.g. the PyTorch reference) by hand. add_op_command also
// registers the other kernels' sub-verbs (op adamw).
#include <algorithm>
#include <array>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "io/safetensors.h"
#include "model/attention_core.h"
#include "plan/video_shape.h"

namespace ms::cli {
namespace {

struct OpArgs {
  std::string inputs, out, window;
  BackendChoice backend = BackendChoice::automatic;
  bool shift = false;
};

struct Input {
  Shape shape;
  std::vector<float> data;
};

// Reads tensor `name` as f32; null when absent and not required.
std::unique_ptr<Input> read_tensor(const SafetensorsFile& f, const std::string& name, bool required) {
  const TensorEntry* e = f.find(name);
  if (!e) {
    if (required) MS_FAIL(f.path(), ": input '", name, "' is missing");
    return nullptr;
  }
  auto in = std::make_unique<Input>();
  in->shape = e->shape;
  in->data.resize(size_t(numel(e->shape)));
  read_as_f32(*e, in->data.data());
  return in;
}

// "kt,kh,kw" -> three positive integers.
std::array<int64_t, 3> parse_window(const std::string& op, const std::string& s) {
  if (s.empty()) MS_FAIL("op ", op, ": --window kt,kh,kw is required");
  return parse_triple(s, cat("op ", op, ": --window"));
}

void run_op(const std::string& op, const OpArgs& a) {
  resolve_backend(a.backend);
  const SafetensorsFile f = SafetensorsFile::open(a.inputs);
  const auto q = read_tensor(f, "q", true), k = read_tensor(f, "k", true), v = read_tensor(f, "v", true);
  const auto dout = read_tensor(f, "grad_out", false);
  if (q->shape.size() != 6)
    MS_FAIL(f.path(), ": 'q' has shape ", shape_str(q->shape), "; it must be [B, T, H, W, nh, d]");
  for (const auto& [name, t] : {std::pair{"k", k.get()}, std::pair{"v", v.get()}, std::pair{"grad_out", dout.get()}})
    if (t && t->shape != q->shape)
      MS_FAIL(f.path(), ": '", name, "' has shape ", shape_str(t->shape), " but 'q' has ", shape_str(q->shape),
              "; they must match");
  const Shape& s = q->shape;
  const VideoAttentionDims d{s[0], s[1], s[2], s[3], s[4], s[5]};
  const std::array<int64_t, 3> window = op == "dense" ? std::array<int64_t, 3>{} : parse_window(op, a.window);
  std::unique_ptr<Input> off;
  int64_t G = 0;
  if (op == "dsa") {
    off = read_tensor(f, "offsets", true);
    const Shape& o = off->shape;
    const int64_t P = window[0] * window[1] * window[2];
    if (o.size() != 7 || !std::equal(s.begin(), s.begin() + 4, o.begin()) || o[6] != 3)
      MS_FAIL(f.path(), ": 'offsets' has shape ", shape_str(o), "; it must be [B, T, H, W, G, P, 3] = [", s[0], ", ",
              s[1], ", ", s[2], ", ", s[3], ", G, ", P, ", 3]");
    if (o[5] != P)
      MS_FAIL(f.path(), ": 'offsets' has P = ", o[5], " slots but --window ", a.window, " has kt*kh*kw = ", P);
    G = o[4];
    if (G <= 0 || d.nh % G) MS_FAIL(f.path(), ": ", d.nh, " heads are not divisible by the offset groups G = ", G);
  }
  const size_t n = q->data.size();
  std::vector<float> out(n), lse(size_t(d.B * d.nh * d.L()));
  const float* offp = off ? off->data.data() : nullptr;
  const AttentionSpec spec{
      .type = parse_name<AttentionType>(op, "op"), .dims = d, .window = window, .shifted = a.shift, .groups = G};
  CpuOps<float> ops;
  AttentionTensors<float> t{
      .q = q->data.data(), .k = k->data.data(), .v = v->data.data(), .out = out.data(), .lse = lse.data()};
  attention_forward(ops, spec, t, offp);
  std::vector<TensorRef> refs{{"out", DType::f32, s, out.data()}};
  std::vector<float> dq, dk, dv, doff;
  if (dout) {
    dq.resize(n);
    dk.resize(n);
    dv.resize(n);
    if (off) doff.resize(off->data.size());
    t.dout = dout->data.data(), t.dq = dq.data(), t.dk = dk.data(), t.dv = dv.data();
    attention_backward(ops, spec, t, offp, off ? doff.data() : nullptr);
    refs.push_back({"grad_q", DType::f32, s, dq.data()});
    refs.push_back({"grad_k", DType::f32, s, dk.data()});
    refs.push_back({"grad_v", DType::f32, s, dv.data()});
    if (off) refs.push_back({"grad_offsets", DType::f32, off->shape, doff.data()});
  }
  write_safetensors(a.out, refs);
  log_info("op ", op, ": wrote ", a.out, " (", refs.size(), " tensors)");
}

}  // namespace

void add_op_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("op", "Run one self-attention operator on q, k, v from a safetensors file");
  cmd->require_subcommand(1);
  const char* help[][2] = {
      {"dense", "Dense attention softmax(q k^T / sqrt(d)) v over all tokens"},
      {"window", "Swin-style 3D window attention (docs/attention.md); --shift for the shifted (odd-block) variant"},
      {"dsa", "3D deformable slide attention with the given offsets (docs/attention.md)"},
  };
  for (const auto& [name, text] : help) {
    const std::string op = name;
    auto a = std::make_shared<OpArgs>();
    CLI::App* sub = cmd->add_subcommand(op, text);
    sub->add_option("--inputs", a->inputs,
                    op == "dsa"
                        ? "safetensors with q, k, v [B,T,H,W,nh,d], offsets [B,T,H,W,G,P,3] (tokens, order t,h,w;"
                          " P = kt*kh*kw), optional grad_out [B,T,H,W,nh,d]"
                        : "safetensors with q, k, v [B,T,H,W,nh,d], optional grad_out [B,T,H,W,nh,d]")
        ->required();
    sub->add_option("--out", a->out,
                    op == "dsa" ? "Output safetensors: out (+ grad_q, grad_k, grad_v, grad_offsets with grad_out)"
                                : "Output safetensors: out (+ grad_q, grad_k, grad_v with grad_out)")
        ->required();
    if (op != "dense") sub->add_option("--window", a->window, "Window kt,kh,kw in tokens (positive)");
    if (op == "window")
      sub->add_flag("--shift", a->shift,
                    "Shift the windows by floor(k/2) per axis with Video-Swin masking, as on odd-numbered blocks");
    add_backend_option(*sub, a->backend);
    sub->callback([op, a] { run_op(op, *a); });
  }
  add_op_adamw(*cmd);
}

}  // namespace ms::cli
