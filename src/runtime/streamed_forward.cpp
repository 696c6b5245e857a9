#include "runtime/streamed_forward.h"

#include <algorithm>

#include "core/check.h"
#include "model/param_table.h"

namespace ms {

StreamedForward::StreamedForward(const ModelConfig& c, const ModelDims& d, Backend& backend,
                                 std::unique_ptr<StageRunner> runner, const uint16_t* weights, int64_t device_memory)
    : dims_(d),
      be_(backend),
      weights_(weights),
      xt_(size_t(c.in_dim * d.F * d.H * d.W)),
      t_(1),
      context_(size_t(d.Lt * c.text_dim)),
      v_(size_t(c.out_dim * d.F * d.H * d.W)) {
  MS_CHECK(d.B == 1 && d.Lt == c.text_len, "StreamedForward: one clip with a context of text_len rows");
  StreamOptions o;
  o.device_memory = device_memory;
  const ParamTable table(c);
  const int stages = int(table.stages().size());
  const int64_t budget = device_memory > 0 ? device_memory : backend.default_device_memory();
  o.prefetch = stages;  // every stage resident, where that fits
  resident_ = budget <= 0 || streamed_arena(c, d, backend.weight_bytes(), runner->act_bytes(), o).peak() <= budget;
  if (!resident_) o.prefetch = 2;
  be_.pin_host(const_cast<uint16_t*>(weights_), size_t(table.total()) * 2);
  for (AlignedBuffer<float>* b : {&xt_, &t_, &context_, &v_}) be_.pin_host(b->data(), b->size() * 4);
  try {
    model_ = std::make_unique<StreamedModel>(c, d, backend, o, std::move(runner));
  } catch (...) {
    for (AlignedBuffer<float>* b : {&xt_, &t_, &context_, &v_}) be_.unpin_host(b->data());
    be_.unpin_host(const_cast<uint16_t*>(weights_));
    throw;
  }
}

StreamedForward::~StreamedForward() {
  model_.reset();  // drains the streams
  for (AlignedBuffer<float>* b : {&xt_, &t_, &context_, &v_}) be_.unpin_host(b->data());
  be_.unpin_host(const_cast<uint16_t*>(weights_));
}

void StreamedForward::operator()(const float* xt, float timestep, const float* context, float* v) {
  std::copy_n(xt, xt_.size(), xt_.data());
  t_.data()[0] = timestep;
  std::copy_n(context, context_.size(), context_.data());
  model_->enqueue_inputs(dims_, xt_.data(), t_.data(), context_.data(), nullptr);
  model_->enqueue_forward(weights_, v_.data());
  model_->finish();
  std::copy_n(v_.data(), v_.size(), v);
}

}  // namespace ms
