// The batches a training run draws: the data opened for the model (open_training_data), and each step's batch
// made from data samples, caption embeddings and the rectified-flow pair (BatchMaker).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "model/config.h"
#include "model/dims.h"
#include "t5/text_encoder.h"
#include "train/options.h"

namespace ms {

// One step's batch in the model's input layout. The buffers hold the largest of the run's step shapes; the first
// dims.B clips (at dims' F, H, W) are this step's.
struct Batch {
  ModelDims dims;                 // this step's (this rank's part of the global batch)
  int64_t clips = 0;              // the global batch's clips: samples [position, position + clips) of the data
  std::vector<float> x0;          // [B, C, F, H, W] clean video
  std::vector<float> context;     // [B, text_len, text_dim]
  std::vector<float> xt, target;  // [B, C, F, H, W] the noised input and the flow target
  std::vector<float> timesteps;   // [B, dims.time_rows] t * 1000 (an image-to-video step: 0 on the first frame)

  // What a streamed step uploads (StreamedModel::enqueue_inputs).
  std::array<std::vector<float>*, 4> uploaded() { return {&xt, &target, &context, &timesteps}; }
};

// Opens opts.data for the model and fills in what the data decides: a zero --frames/--height/--width where the data
// has one clip shape (its size), and a zero --batch-size for generated data (2). With a dataset TOML a zero
// --batch-size stays zero: each entry's batch_size. With several ranks the data's batches are global: `ranks` times
// the per-rank batch size.
std::unique_ptr<Dataset> open_training_data(TrainOptions& opts, const ModelConfig& cfg, int ranks = 1);
// The step shapes of one rank of `ranks` on `data` (its buckets, each at its largest batch, of which a rank takes
// every ranks-th clip); throws ms::Error naming a clip shape the model cannot take.
// per_frame_t: the shapes of steps with one timestep per latent frame (image-to-video steps).
StepShapes step_shapes(const Dataset& data, const ModelConfig& cfg, int ranks = 1, bool per_frame_t = false);
// Whether opts train image-to-video steps (--i2v-ratio > 0); throws ms::Error unless cfg is a TI2V model, which
// takes its image as the clean first latent frame.
bool i2v_steps(const TrainOptions& opts, const ModelConfig& cfg);
// The clips rank r takes from a global batch of `clips`: r, r + ranks, ... (docs/distributed.md).
int64_t rank_clips(int64_t clips, int rank, int ranks);
// Each rank's share of a global batch of `clips`: the weight of its mean-loss gradients in the batch's.
std::vector<float> rank_weights(int64_t clips, int ranks);
// The largest clip shape of the data (by latent positions F x H x W): what samples are drawn at.
DataShape largest_shape(const Dataset& data);

// --caption-dropout: each clip trains on the empty prompt with probability p (one uniform draw per clip, only when
// p > 0): the empty prompt's cached embedding, or the empty caption for data with captions.
struct CaptionDropout {
  double p = 0;
  std::vector<float> empty;  // [L, text_dim] (--empty-prompt); none: the empty caption
};

// The caption dropout opts ask for on `data`: reads --empty-prompt; throws ms::Error when cached text embeddings
// lack it, or captions are given one.
CaptionDropout caption_dropout(const TrainOptions& opts, const Dataset& data, const ModelConfig& cfg);

// The text encoder of --t5 (null without it); throws ms::Error for --t5 without --tokenizer or the reverse, files
// that cannot be loaded, or an encoder whose width or text_len does not fit the model.
std::unique_ptr<TextEncoder> load_text_encoder(const TrainOptions& opts, const Dataset& data, const ModelConfig& cfg);

class BatchMaker {
 public:
  // hooks: the data testing aids (a failing or an Inf sample); t5: embeds captions (each once), null: the hash.
  // i2v_ratio: the probability of an image-to-video step (TI2V, as DiffSynth-Studio trains Wan2.2's TI2V-5B): every
  // clip's first latent frame stays clean in x_t, its tokens see t = 0, and the loss leaves it out.
  BatchMaker(const ModelConfig& c, const StepShapes& shapes, Dataset& data, const FlowConfig& flow,
             CaptionDropout dropout, const TrainHooks& hooks, const TextEncoder* t5, double i2v_ratio = 0);

  // Sizes every buffer of a batch for the largest step shape.
  void allocate(Batch& batch) const;
  // Rank r's part of the batch that starts at data position `position` (Dataset::batch_at), samples [position,
  // position + clips): its clips r, r + ranks, ... (rank_clips; a rank with none computes clip 0, weighted 0), their
  // caption embeddings (a cache's, zero-padded to text_len as Wan does, or the deterministic embedding of the
  // caption), and each clip's timestep and noise: the numbers one process would draw from rng for that clip of the
  // whole batch, which leaves rng where one process leaves it; with an i2v ratio, one draw first decides whether
  // the step is image to video. Returns the global batch's clips.
  int64_t make(Batch& batch, int64_t position, Rng& rng, int rank = 0, int ranks = 1);

 private:
  ModelConfig cfg_;
  StepShapes shapes_;
  Dataset& data_;
  FlowConfig flow_;
  CaptionDropout dropout_;
  TrainHooks hooks_;
  std::vector<float> noise_;  // [B, C, F, H, W] of the largest shape
  const TextEncoder* t5_;
  double i2v_ratio_;
  std::unordered_map<std::string, std::vector<float>> encoded_;  // caption -> its t5 rows [L, text_dim]
};

}  // namespace ms
