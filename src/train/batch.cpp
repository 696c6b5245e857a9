#include "train/batch.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "data/text_embed.h"
#include "train/flow_matching.h"

namespace ms {

std::unique_ptr<Dataset> open_training_data(TrainOptions& opts, const ModelConfig& cfg) {
  DataOptions d;
  d.source = opts.data;
  d.mnist_dir = opts.mnist_dir;
  d.on_bad_data = opts.on_bad_data;
  d.seed = opts.seed;
  d.frames = opts.frames, d.height = opts.height, d.width = opts.width;
  d.in_dim = cfg.in_dim, d.text_len = cfg.text_len, d.text_dim = cfg.text_dim;
  std::unique_ptr<Dataset> data = open_dataset(d);
  const DataShape s = data->shape();
  opts.frames = s.frames, opts.height = s.height, opts.width = s.width;
  if (opts.batch_size == 0) opts.batch_size = data->batch_size() > 0 ? data->batch_size() : 2;
  return data;
}

BatchMaker::BatchMaker(const ModelConfig& c, const ModelDims& d, Dataset& data, const FlowConfig& flow,
                       const TrainHooks& hooks)
    : cfg_(c), dims_(d), data_(data), flow_(flow), hooks_(hooks) {
  noise_.resize(size_t(d.B * c.in_dim * d.F * d.H * d.W));
}

void BatchMaker::allocate(Batch& batch) const {
  for (auto* v : {&batch.x0, &batch.xt, &batch.target}) v->resize(noise_.size());
  batch.context.resize(size_t(dims_.B * cfg_.text_len * cfg_.text_dim));
  batch.timesteps.resize(size_t(dims_.B));
}

void BatchMaker::make(Batch& batch, int64_t position, Rng& rng) {
  const int64_t clip = cfg_.in_dim * dims_.F * dims_.H * dims_.W, ctx = cfg_.text_len * cfg_.text_dim;
  for (int64_t b = 0; b < dims_.B; ++b) {
    if (position + b == hooks_.inject_data_error) MS_FAIL("data sample ", position + b, ": injected data error");
    DataSample s = data_.get(position + b);
    MS_CHECK(int64_t(s.x0.size()) == clip, "data sample ", position + b, " has ", s.x0.size(), " values, expected ",
             clip);
    std::copy(s.x0.begin(), s.x0.end(), batch.x0.begin() + b * clip);
    if (position + b == hooks_.inject_inf_data)  // testing aid
      batch.x0[size_t(b * clip + clip / 2)] = std::numeric_limits<float>::infinity();
    float* context = batch.context.data() + b * ctx;  // [text_len, text_dim]
    if (s.context.empty()) {
      embed_caption(s.caption, cfg_.text_len, cfg_.text_dim, context);
    } else {  // cached embedding [L, text_dim], zero-padded to text_len as Wan does
      std::copy(s.context.begin(), s.context.end(), context);
      std::fill(context + s.context.size(), context + ctx, 0.0f);
    }
    const double t = sample_timestep(flow_, rng);
    batch.timesteps[size_t(b)] = float(t * 1000.0);
    for (int64_t i = 0; i < clip; ++i) noise_[size_t(b * clip + i)] = float(rng.normal());
    make_flow_pair(batch.x0.data() + b * clip, noise_.data() + b * clip, t, batch.xt.data() + b * clip,
                   batch.target.data() + b * clip, clip);
  }
}

}  // namespace ms
