// A model's forward on a backend, for sampling (sample/generate.h): StreamedModel's forward alone over bf16 weights.
// Every stage keeps a slot of its own when the arena for that fits the device's budget, so the model crosses the link
// once for the whole sampling run; otherwise two slots stream the stages on every forward.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/aligned.h"
#include "model/config.h"
#include "model/dims.h"
#include "runtime/backend.h"
#include "runtime/stage_runner.h"
#include "runtime/streamed_model.h"

namespace ms {

class StreamedForward {
 public:
  using MakeRunner = std::function<std::unique_ptr<StageRunner>()>;
  // weights bf16 [ParamTable(c).total()] in host memory, pinned here for the forward's life and unchanged meanwhile;
  // make_runner: the backend's runner for d (one clip: d.B = 1; d.Lt = text_len). device_memory: the arena's budget
  // (0: the backend's default). Every stage resident where that arena fits the budget and can be allocated, else two
  // slots; throws ms::Error saying what to do when even those do not fit.
  StreamedForward(const ModelConfig& c, const ModelDims& d, Backend& backend, const MakeRunner& make_runner,
                  const uint16_t* weights, int64_t device_memory = 0);
  ~StreamedForward();
  StreamedForward(const StreamedForward&) = delete;
  StreamedForward& operator=(const StreamedForward&) = delete;

  // v [in_dim, F, H, W] = the model's velocity at x_t [in_dim, F, H, W], timesteps [d.time_rows] (t x 1000) and
  // context [text_len, text_dim] (zero-padded rows included).
  void operator()(const float* xt, const float* timesteps, const float* context, float* v);
  // Whether every stage stays on the device between forwards.
  bool resident() const { return resident_; }
  // Weight elements the last forward uploaded (0 once a resident model is on the device).
  int64_t last_uploads() const { return model_->forward_uploads(); }

 private:
  ModelDims dims_;
  Backend& be_;
  const uint16_t* weights_;
  bool resident_ = false;
  AlignedBuffer<float> xt_, t_, context_, v_;  // staging: what the link copies from and to
  std::vector<HostPin> pins_;                  // the weights and the staging buffers
  std::unique_ptr<StreamedModel> model_;       // first to go: its streams drain before the pins end
};

}  // namespace ms
