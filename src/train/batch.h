// The batches a training run draws: the data opened for the model (open_training_data), and each step's batch
// made from data samples, caption embeddings and the rectified-flow pair (BatchMaker).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "model/config.h"
#include "model/dims.h"
#include "train/options.h"

namespace ms {

// One step's batch in the model's input layout.
struct Batch {
  std::vector<float> x0;          // [B, C, F, H, W] clean video
  std::vector<float> context;     // [B, text_len, text_dim]
  std::vector<float> xt, target;  // [B, C, F, H, W] the noised input and the flow target
  std::vector<float> timesteps;   // [B] t * 1000

  // What a streamed step uploads (StreamedModel::enqueue_inputs).
  std::array<std::vector<float>*, 4> uploaded() { return {&xt, &target, &context, &timesteps}; }
};

// Opens opts.data for the model and fills in what the data decides: a zero --frames/--height/--width (the data's
// own clip size) and a zero --batch-size (the TOML's batch_size, else 2).
std::unique_ptr<Dataset> open_training_data(TrainOptions& opts, const ModelConfig& cfg);

class BatchMaker {
 public:
  // hooks: the data testing aids (a failing or an Inf sample).
  BatchMaker(const ModelConfig& c, const ModelDims& d, Dataset& data, const FlowConfig& flow, const TrainHooks& hooks);

  // Sizes every buffer of a batch.
  void allocate(Batch& batch) const;
  // The batch of data samples [position, position + B): clips, caption embeddings (a cache's, zero-padded to
  // text_len as Wan does, or the deterministic embedding of the caption), a timestep and noise per clip from rng.
  void make(Batch& batch, int64_t position, Rng& rng);

 private:
  ModelConfig cfg_;
  ModelDims dims_;
  Dataset& data_;
  FlowConfig flow_;
  TrainHooks hooks_;
  std::vector<float> noise_;  // [B, C, F, H, W]
};

}  // namespace ms
