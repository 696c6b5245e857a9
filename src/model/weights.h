// Named views of one stage's parameters (or gradients). P is `const T*` for parameters, `T*` for
// gradients. The visitors below define, in one place, every parameter's Wan key name, shape and
// position inside its stage: the parameter table and the bindings are both built from them.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "model/config.h"

namespace ms {

template <class P>
struct LinearW {
  P w, b;  // w [out, in], b [out]
};

template <class P>
struct AttnW {
  LinearW<P> q, k, v, o;  // [dim, dim] each
  P norm_q, norm_k;       // RMSNorm weights [dim]
};

template <class P>
struct StemW {
  LinearW<P> patch;         // patch_embedding: w [dim, in_dim, pt, ph, pw] (= [dim, in_dim*pt*ph*pw]), b [dim]
  LinearW<P> text0, text2;  // text_embedding.0 [dim, text_dim], .2 [dim, dim]
  LinearW<P> time0, time2;  // time_embedding.0 [dim, freq_dim], .2 [dim, dim]
  LinearW<P> time_proj;     // time_projection.1 [6*dim, dim]
};

template <class P>
struct BlockW {
  P modulation;  // [1, 6, dim]
  AttnW<P> self_attn;
  P offset_conv_w, offset_conv_b;  // dsa only: self_attn.offset_conv [dim, 1, 3, 3, 3], [dim]
  LinearW<P> offset_proj;          // dsa only: self_attn.offset_proj [G*P*3, dim]
  P norm3_w, norm3_b;              // [dim]
  AttnW<P> cross_attn;
  LinearW<P> ffn0, ffn2;  // [ffn_dim, dim], [dim, ffn_dim]
};

template <class P>
struct HeadW {
  P modulation;     // [1, 2, dim]
  LinearW<P> head;  // [out_dim*pt*ph*pw, dim]
};

// f(name, shape, field) for every parameter of a stage, in storage order.
template <class P, class F>
void visit_linear(const std::string& name, int64_t out, int64_t in, LinearW<P>& w, F&& f) {
  f(name + ".weight", Shape{out, in}, w.w);
  f(name + ".bias", Shape{out}, w.b);
}

template <class P, class F>
void visit_stem(const ModelConfig& c, StemW<P>& w, F&& f) {
  const auto& p = c.patch_size;
  f("patch_embedding.weight", Shape{c.dim, c.in_dim, p[0], p[1], p[2]}, w.patch.w);
  f("patch_embedding.bias", Shape{c.dim}, w.patch.b);
  visit_linear("text_embedding.0", c.dim, c.text_dim, w.text0, f);
  visit_linear("text_embedding.2", c.dim, c.dim, w.text2, f);
  visit_linear("time_embedding.0", c.dim, c.freq_dim, w.time0, f);
  visit_linear("time_embedding.2", c.dim, c.dim, w.time2, f);
  visit_linear("time_projection.1", 6 * c.dim, c.dim, w.time_proj, f);
}

template <class P, class F>
void visit_attn(const std::string& prefix, const ModelConfig& c, AttnW<P>& w, F&& f) {
  visit_linear(prefix + "q", c.dim, c.dim, w.q, f);
  visit_linear(prefix + "k", c.dim, c.dim, w.k, f);
  visit_linear(prefix + "v", c.dim, c.dim, w.v, f);
  visit_linear(prefix + "o", c.dim, c.dim, w.o, f);
  f(prefix + "norm_q.weight", Shape{c.dim}, w.norm_q);
  f(prefix + "norm_k.weight", Shape{c.dim}, w.norm_k);
}

template <class P, class F>
void visit_block(const ModelConfig& c, int64_t index, BlockW<P>& w, F&& f) {
  const std::string p = "blocks." + std::to_string(index) + ".";
  f(p + "modulation", Shape{1, 6, c.dim}, w.modulation);
  visit_attn(p + "self_attn.", c, w.self_attn, f);
  if (c.attention.has_offsets()) {  // DSA's offset network; dense checkpoints have none
    f(p + "self_attn.offset_conv.weight", Shape{c.dim, 1, 3, 3, 3}, w.offset_conv_w);
    f(p + "self_attn.offset_conv.bias", Shape{c.dim}, w.offset_conv_b);
    visit_linear(p + "self_attn.offset_proj", c.groups() * c.attention.slots() * 3, c.dim, w.offset_proj, f);
  }
  f(p + "norm3.weight", Shape{c.dim}, w.norm3_w);
  f(p + "norm3.bias", Shape{c.dim}, w.norm3_b);
  visit_attn(p + "cross_attn.", c, w.cross_attn, f);
  visit_linear(p + "ffn.0", c.ffn_dim, c.dim, w.ffn0, f);
  visit_linear(p + "ffn.2", c.dim, c.ffn_dim, w.ffn2, f);
}

template <class P, class F>
void visit_head(const ModelConfig& c, HeadW<P>& w, F&& f) {
  f("head.modulation", Shape{1, 2, c.dim}, w.modulation);
  visit_linear("head.head", c.out_dim * c.patch_volume(), c.dim, w.head, f);
}

// Binds a stage's views to `base`, the start of that stage in a pool laid out by the visitors.
template <class W, class T, class Visit>
W bind_stage(T* base, Visit&& visit) {
  W w{};
  int64_t offset = 0;
  visit(w, [&](const std::string&, const Shape& s, auto& field) {
    field = base + offset;
    offset += numel(s);
  });
  return w;
}

template <class T>
StemW<T*> bind_stem(const ModelConfig& c, T* base) {
  return bind_stage<StemW<T*>>(base, [&](auto& w, auto&& f) { visit_stem(c, w, f); });
}
template <class T>
BlockW<T*> bind_block(const ModelConfig& c, T* base) {
  return bind_stage<BlockW<T*>>(base, [&](auto& w, auto&& f) { visit_block(c, 0, w, f); });
}
template <class T>
HeadW<T*> bind_head(const ModelConfig& c, T* base) {
  return bind_stage<HeadW<T*>>(base, [&](auto& w, auto&& f) { visit_head(c, w, f); });
}

}  // namespace ms
