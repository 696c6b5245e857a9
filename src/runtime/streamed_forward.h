// A model's forward on a backend, for sampling (sample/generate.h): StreamedModel's forward alone over bf16 weights.
// Every stage keeps a slot of its own when the arena for that fits the device's budget, so the model crosses the link
// once for the whole sampling run; otherwise two slots stream the stages on every forward.
#pragma once
#include <cstdint>
#include <memory>

#include "core/aligned.h"
#include "model/config.h"
#include "model/dims.h"
#include "runtime/backend.h"
#include "runtime/stage_runner.h"
#include "runtime/streamed_model.h"

namespace ms {

class StreamedForward {
 public:
  // weights bf16 [ParamTable(c).total()] in host memory, pinned here for the forward's life and unchanged meanwhile;
  // runner: the backend's, made for d (one clip: d.B = 1; d.Lt = text_len). device_memory: the arena's budget (0:
  // the backend's default). Throws ms::Error naming the minimum when even two slots do not fit.
  StreamedForward(const ModelConfig& c, const ModelDims& d, Backend& backend, std::unique_ptr<StageRunner> runner,
                  const uint16_t* weights, int64_t device_memory = 0);
  ~StreamedForward();
  StreamedForward(const StreamedForward&) = delete;
  StreamedForward& operator=(const StreamedForward&) = delete;

  // v [in_dim, F, H, W] = the model's velocity at x_t [in_dim, F, H, W], timestep [1] (t x 1000) and context
  // [text_len, text_dim] (zero-padded rows included).
  void operator()(const float* xt, float timestep, const float* context, float* v);
  // Whether every stage stays on the device between forwards.
  bool resident() const { return resident_; }

 private:
  ModelDims dims_;
  Backend& be_;
  const uint16_t* weights_;
  bool resident_ = false;
  AlignedBuffer<float> xt_, t_, context_, v_;  // pinned staging: what the link copies from and to
  std::unique_ptr<StreamedModel> model_;
};

}  // namespace ms
