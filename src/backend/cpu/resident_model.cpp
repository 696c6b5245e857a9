#include "backend/cpu/resident_model.h"

#include <algorithm>

#include "backend/cpu/cpu_stages.h"
#include "core/check.h"
#include "runtime/arena.h"

namespace ms {

namespace {

// One block's activations, laid out for every shape of a run.
template <class T>
auto block_acts_visitor(const ModelConfig& c, const StepShapes& shapes) {
  return shapes_visitor<BlockActs<T>>(shapes,
                                      [&c](const ModelDims& d, auto& a, auto&& f) { visit_block_acts(c, d, a, f); });
}

// Elements of one block's activations; with keep_acts, the model keeps num_layers - 1 such sets.
template <class T>
int64_t block_acts_numel(const ModelConfig& c, const StepShapes& shapes) {
  return workspace_bytes<BlockActs<T>>(block_acts_visitor<T>(c, shapes), sizeof(T)) / int64_t(sizeof(T));
}

int64_t kept_sets(const ModelConfig& c, bool keep_acts) { return keep_acts ? kept_block_act_sets(c) : 0; }

}  // namespace

template <class T>
ResidentModel<T>::ResidentModel(const ModelConfig& c, const StepShapes& shapes, bool keep_acts)
    : cfg_(c),
      shapes_(shapes),
      dims_(shapes.all.front()),
      table_(c),
      checkpoint_numel_(shapes.most([](const ModelDims& d) { return d.N(); }) * c.dim) {
  buffer_ = AlignedBuffer<T>(size_t(workspace_bytes(cfg_, shapes_) / int64_t(sizeof(T))));
  ws_ = bind_workspace<ModelWorkspace<T>>(buffer_.data(), model_workspace_visitor<ModelWorkspace<T>>(cfg_, shapes_),
                                          sizeof(T));
  const int64_t sets = kept_sets(cfg_, keep_acts);
  if (sets == 0) return;
  const int64_t block = block_acts_numel<T>(cfg_, shapes_);
  kept_buffer_ = AlignedBuffer<T>(size_t(sets * block));
  for (int64_t i = 0; i < sets; ++i)
    kept_.push_back(
        bind_workspace<BlockActs<T>>(kept_buffer_.data() + i * block, block_acts_visitor<T>(cfg_, shapes_), sizeof(T)));
}

template <class T>
int64_t ResidentModel<T>::workspace_bytes(const ModelConfig& c, const StepShapes& shapes, bool keep_acts) {
  const int64_t kept = kept_sets(c, keep_acts) * block_acts_numel<T>(c, shapes) * int64_t(sizeof(T));
  return ms::workspace_bytes<ModelWorkspace<T>>(model_workspace_visitor<ModelWorkspace<T>>(c, shapes), sizeof(T)) +
         kept;
}

template <class T>
void ResidentModel<T>::set_dims(const ModelDims& d) {
  MS_CHECK(shapes_.fits(d), "a step of ", d.B, " x ", d.F, "x", d.H, "x", d.W, " does not fit the model's shapes");
  dims_ = d;
}

template <class T>
void ResidentModel<T>::forward(const T* params, const T* latents, const T* t, const T* context, T* velocity) {
  const auto& st = table_.stages();
  const int64_t ND = dims_.N() * cfg_.dim, stride = checkpoint_numel_;
  stem_forward(cfg_, dims_, bind_stem(cfg_, params + st.front().offset), latents, t, context, ws_.stem);
  std::copy(ws_.stem.x0, ws_.stem.x0 + ND, ws_.xs);
  if (probe_) probe_(0, ws_.xs, ND);
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    block_forward(cfg_, dims_, i, bind_block(cfg_, params + st[size_t(i + 1)].offset), ws_.xs + i * stride, ws_.stem.e0,
                  ws_.stem.ctx, acts(i), ws_.xs + (i + 1) * stride);
    if (probe_) probe_(i + 1, ws_.xs + (i + 1) * stride, ND);
  }
  head_forward(cfg_, dims_, bind_head(cfg_, params + st.back().offset), ws_.xs + cfg_.num_layers * stride, ws_.stem.e,
               ws_.head, velocity);
  if (probe_) probe_(cfg_.num_layers + 1, velocity, dims_.B * cfg_.out_dim * dims_.F * dims_.H * dims_.W);
}

template <class T>
void ResidentModel<T>::backward(const T* params, const T* dvelocity, T* grads, T* dlatents, T* dcontext) {
  const auto& st = table_.stages();
  const int64_t stride = checkpoint_numel_, B = dims_.B, D = cfg_.dim;
  std::fill(ws_.de, ws_.de + dims_.Bt() * D, T(0));
  std::fill(ws_.de0, ws_.de0 + dims_.Bt() * 6 * D, T(0));
  std::fill(ws_.dctx, ws_.dctx + B * dims_.Lt * D, T(0));
  head_backward(cfg_, dims_, bind_head(cfg_, params + st.back().offset), ws_.xs + cfg_.num_layers * stride, ws_.head,
                dvelocity, ws_.dres, ws_.de, bind_head(cfg_, grads + st.back().offset), ws_.scratch);
  // Kept activations need no recompute; nor does the last block's, still in ws_.block from the forward.
  const bool recompute = kept_.empty();
  for (int64_t i = cfg_.num_layers - 1; i >= 0; --i) {
    const size_t s = size_t(i + 1);
    block_backward(cfg_, dims_, i, bind_block(cfg_, params + st[s].offset), ws_.xs + i * stride, ws_.stem.e0,
                   ws_.stem.ctx, acts(i), ws_.block_grads, ws_.dres, ws_.dres, ws_.de0, ws_.dctx,
                   bind_block(cfg_, grads + st[s].offset), recompute);
  }
  stem_backward(cfg_, dims_, bind_stem(cfg_, params + st.front().offset), ws_.stem, ws_.dres, ws_.de, ws_.de0, ws_.dctx,
                bind_stem(cfg_, grads + st.front().offset), dlatents, dcontext, ws_.scratch);
}

template class ResidentModel<float>;
template class ResidentModel<double>;

}  // namespace ms
