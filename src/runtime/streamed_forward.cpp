#include "runtime/streamed_forward.h"

#include <algorithm>

#include "core/check.h"
#include "model/param_table.h"

namespace ms {

StreamedForward::StreamedForward(const ModelConfig& c, const ModelDims& d, Backend& backend,
                                 const MakeRunner& make_runner, const uint16_t* weights, int64_t device_memory)
    : dims_(d),
      be_(backend),
      weights_(weights),
      xt_(size_t(c.in_dim * d.F * d.H * d.W)),
      t_(size_t(d.Bt())),
      context_(size_t(d.Lt * c.text_dim)),
      v_(size_t(c.out_dim * d.F * d.H * d.W)) {
  MS_CHECK(d.B == 1 && d.Lt == c.text_len, "StreamedForward: one clip with a context of text_len rows");
  const ParamTable table(c);
  pins_.emplace_back(backend, const_cast<uint16_t*>(weights_), size_t(table.total()) * 2);
  for (AlignedBuffer<float>* b : {&xt_, &t_, &context_, &v_}) pins_.emplace_back(backend, b->data(), b->size() * 4);
  StreamOptions o;
  o.device_memory = device_memory;
  o.forward_only = true;
  const int64_t budget = device_memory > 0 ? device_memory : backend.default_device_memory();
  // Every stage resident where the plan fits the budget and the device can give it (other processes may hold
  // some of its memory), else two slots streamed per forward.
  const int stages = int(table.stages().size());
  std::unique_ptr<StageRunner> runner = make_runner();
  const int act_bytes = runner->act_bytes();
  for (const int k : {stages, 2}) {
    o.prefetch = k;
    if (k > 2 && budget > 0 && streamed_arena(c, d, backend.weight_bytes(), act_bytes, o).peak() > budget) continue;
    if (!runner) runner = make_runner();  // the one a failed attempt took with it
    try {
      model_ = std::make_unique<StreamedModel>(c, d, backend, o, std::move(runner));
      resident_ = k == stages;
      return;
    } catch (const Error& e) {
      if (k == 2)
        MS_FAIL("sampling a clip of ", d.F, "x", d.H, "x", d.W, " on the ", backend.kind(), " backend: ", e.what(),
                ". Sample fewer frames or a smaller size, or use --backend cpu");
    }
  }
}

StreamedForward::~StreamedForward() {
  try {
    be_.sync_all();
  } catch (...) {  // the error that ended the sampling is already on its way out
  }
}

void StreamedForward::operator()(const float* xt, const float* timesteps, const float* context, float* v) {
  std::copy_n(xt, xt_.size(), xt_.data());
  std::copy_n(timesteps, t_.size(), t_.data());
  std::copy_n(context, context_.size(), context_.data());
  model_->enqueue_inputs(dims_, xt_.data(), t_.data(), context_.data(), nullptr);
  model_->enqueue_forward(weights_, v_.data());
  model_->finish();
  std::copy_n(v_.data(), v_.size(), v);
}

}  // namespace ms
