// Where a training step first goes non-finite: its input batch, a forward stage's output, a backward stage's
// gradients, or only the loss and norm. The trainer skips (or stops at) such a step and logs what this finds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/dims.h"

namespace ms {

// How many of x[0, n) are NaN or infinite (every exponent bit set); vectorises, unlike std::isfinite.
int64_t count_nonfinite(const float* x, int64_t n);

class NonFiniteMonitor {
 public:
  // inject_nan_activation: the testing aid's step (TrainHooks), 0: never.
  NonFiniteMonitor(const ModelConfig& c, int64_t inject_nan_activation)
      : cfg_(c), inject_nan_activation_(inject_nan_activation) {}

  // Forgets the previous step's forward.
  void start_step(int64_t step) { forward_ = Forward{step}; }
  // Every stage's forward output passes here (a StageProbe, on the compute stream): the testing aid's NaN, then
  // the count of the first stage that is not finite.
  void probe(int64_t stage, float* out, int64_t n);
  // "" when every clip of the batch is finite; else which clip (and data sample) is not. x0 [B, C, F, H, W],
  // context [B, text_len, text_dim] at dims d; the batch holds data samples position .. position + B - 1.
  std::string check_batch(const ModelDims& d, const float* x0, const float* context, int64_t position) const;
  // Why a step whose loss or norm is not finite is so: the first forward stage whose output is not finite, else
  // the first backward stage (head first) whose gradients' sum of squares (stage_sumsq, stage order) is not.
  std::string locate(double loss, double norm, const std::vector<double>& stage_sumsq) const;

 private:
  struct Forward {
    int64_t step = 0;       // the step being computed
    int64_t stage = -1;     // the first stage whose forward output is not finite (-1: none yet)
    int64_t nonfinite = 0;  // how many of its values are not
    int64_t values = 0;     // of how many
  };
  std::string stage_name(int64_t s) const;

  ModelConfig cfg_;
  int64_t inject_nan_activation_;
  Forward forward_;  // written by the probe on the compute stream, read after the step
};

}  // namespace ms
