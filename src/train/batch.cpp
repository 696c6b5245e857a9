#include "train/batch.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "core/log.h"
#include "data/latent_cache.h"
#include "data/text_embed.h"
#include "sample/generate.h"
#include "train/flow_matching.h"

namespace ms {

std::unique_ptr<Dataset> open_training_data(TrainOptions& opts, const ModelConfig& cfg, int ranks) {
  DataOptions d;
  d.ranks = ranks;
  d.source = opts.data;
  d.mnist_dir = opts.mnist_dir;
  d.on_bad_data = opts.on_bad_data;
  d.seed = opts.seed;
  d.batch_size = opts.batch_size;
  d.frames = opts.frames, d.height = opts.height, d.width = opts.width;
  d.in_dim = cfg.in_dim, d.text_len = cfg.text_len, d.text_dim = cfg.text_dim;
  std::unique_ptr<Dataset> data = open_dataset(d);
  const std::vector<BatchShape> shapes = data->batch_shapes();
  if (shapes.size() == 1) {
    const DataShape& s = shapes.front().shape;
    opts.frames = s.frames, opts.height = s.height, opts.width = s.width;
  }
  if (opts.batch_size == 0 && dynamic_cast<const OneShapeDataset*>(data.get()))
    opts.batch_size = shapes.front().clips / ranks;
  return data;
}

int64_t rank_clips(int64_t clips, int rank, int ranks) {
  return std::max<int64_t>(0, (clips - rank + ranks - 1) / ranks);
}

std::vector<float> rank_weights(int64_t clips, int ranks) {
  std::vector<float> w;
  for (int r = 0; r < ranks; ++r) w.push_back(float(double(rank_clips(clips, r, ranks)) / double(clips)));
  return w;
}

bool i2v_steps(const TrainOptions& opts, const ModelConfig& cfg) {
  if (opts.i2v_ratio == 0) return false;
  cfg.require_image_frame("--i2v-ratio");
  return true;
}

StepShapes step_shapes(const Dataset& data, const ModelConfig& cfg, int ranks, bool per_frame_t) {
  std::vector<ModelDims> dims;
  for (const BatchShape& b : data.batch_shapes()) {
    try {
      const int64_t B = std::max<int64_t>(1, rank_clips(b.clips, 0, ranks));
      dims.push_back(ModelDims::make(cfg, B, b.shape.frames, b.shape.height, b.shape.width, cfg.text_len));
      if (per_frame_t)
        dims.back() =
            ModelDims::make(cfg, B, b.shape.frames, b.shape.height, b.shape.width, cfg.text_len, dims.back().f);
    } catch (const Error& e) {
      // The default job's model spans 4 frames a token; the tiny preset takes any frame count.
      const bool pixel_patch_in_time = cfg.in_dim == 3 && cfg.patch_size[0] > 1;
      MS_FAIL("the data holds clips of ", b.shape.frames, "x", b.shape.height, "x", b.shape.width,
              " (F x H x W) that the model cannot take: ", e.what(),
              pixel_patch_in_time ? "; --model tiny takes any number of frames" : "");
    }
  }
  return StepShapes(std::move(dims));
}

DataShape largest_shape(const Dataset& data) {
  DataShape best;
  for (const BatchShape& b : data.batch_shapes())
    if (b.shape.frames * b.shape.height * b.shape.width > best.frames * best.height * best.width) best = b.shape;
  return best;
}

CaptionDropout caption_dropout(const TrainOptions& opts, const Dataset& data, const ModelConfig& cfg) {
  if (!opts.empty_prompt.empty() && !data.cached_text())
    MS_FAIL(
        "--empty-prompt is for cached text embeddings (a latent cache); with captions --caption-dropout trains "
        "on the empty caption. Drop --empty-prompt");
  if (opts.caption_dropout == 0) return {};
  if (opts.empty_prompt.empty() && data.cached_text())
    MS_FAIL(
        "--caption-dropout on cached text embeddings needs --empty-prompt FILE: the empty prompt's "
        "text-encoder cache file (musubi-tuner's wan_cache_text_encoder_outputs.py on an empty caption)");
  if (opts.empty_prompt.empty()) return {opts.caption_dropout, {}};
  try {
    return {opts.caption_dropout, read_text_cache(opts.empty_prompt, cfg.text_len, cfg.text_dim)};
  } catch (const Error& e) {
    MS_FAIL("--empty-prompt: ", e.what());
  }
}

std::unique_ptr<TextEncoder> load_text_encoder(const TrainOptions& opts, const Dataset& data, const ModelConfig& cfg) {
  if (opts.t5.empty() != opts.tokenizer.empty())
    MS_FAIL(opts.t5.empty() ? "--tokenizer needs --t5 (the umT5 encoder)"
                            : "--t5 needs --tokenizer (umT5's spiece.model)");
  if (opts.t5.empty()) {
    if (!opts.t5_config.empty()) MS_FAIL("--t5-config needs --t5");
    return nullptr;
  }
  if (data.cached_text() && !opts.samples.draws())
    log_warn("--t5 is not used: the data holds cached text embeddings and no samples are drawn");
  auto t5 = std::make_unique<TextEncoder>(opts.t5, opts.tokenizer, opts.t5_config);
  check_text_encoder_fits(cfg, *t5);
  log_info("text encoder ", opts.t5, ": captions are embedded by umT5 (", t5->config().num_layers,
           " layers), each once");
  return t5;
}

BatchMaker::BatchMaker(const ModelConfig& c, const StepShapes& shapes, Dataset& data, const FlowConfig& flow,
                       CaptionDropout dropout, const TrainHooks& hooks, const TextEncoder* t5, double i2v_ratio)
    : cfg_(c),
      shapes_(shapes),
      data_(data),
      flow_(flow),
      dropout_(std::move(dropout)),
      hooks_(hooks),
      t5_(t5),
      i2v_ratio_(i2v_ratio) {
  noise_.resize(size_t(shapes.most([&](const ModelDims& d) { return d.B * c.in_dim * d.F * d.H * d.W; })));
}

void BatchMaker::allocate(Batch& batch) const {
  for (auto* v : {&batch.x0, &batch.xt, &batch.target}) v->resize(noise_.size());
  const int64_t B = shapes_.most([](const ModelDims& d) { return d.B; });
  batch.context.resize(size_t(B * cfg_.text_len * cfg_.text_dim));
  batch.timesteps.resize(size_t(shapes_.most([](const ModelDims& d) { return d.Bt(); })));
}

int64_t BatchMaker::make(Batch& batch, int64_t position, Rng& rng, int rank, int ranks) {
  const BatchShape at = data_.batch_at(position);
  const int64_t mine = rank_clips(at.clips, rank, ranks);
  batch.clips = at.clips;
  const bool i2v = i2v_ratio_ > 0 && rng.uniform() < i2v_ratio_;
  batch.dims = ModelDims::make(cfg_, std::max<int64_t>(1, mine), at.shape.frames, at.shape.height, at.shape.width,
                               cfg_.text_len);
  if (i2v && batch.dims.F > 1) {  // a timestep per latent frame, the first frame's 0 (a lone frame: nothing to learn)
    batch.dims =
        ModelDims::make(cfg_, batch.dims.B, batch.dims.F, batch.dims.H, batch.dims.W, cfg_.text_len, batch.dims.f);
    batch.dims.cond_frames = 1;
  }
  const ModelDims& d = batch.dims;
  const int64_t clip = cfg_.in_dim * d.F * d.H * d.W, ctx = cfg_.text_len * cfg_.text_dim;
  // Every clip of the batch draws the same count of numbers, so clip j's start at j x that count from rng's state.
  const int64_t draws = (dropout_.p > 0 ? 1 : 0) + timestep_draws(flow_) + 2 * clip;
  const Rng start = rng;
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t j = mine > 0 ? rank + b * ranks : 0, item = position + j;  // the clip of the global batch
    rng.set_state(start.state_after(uint64_t(j * draws)));
    if (item == hooks_.inject_data_error) MS_FAIL("data sample ", item, ": injected data error");
    DataSample s = data_.get(item);
    MS_CHECK(int64_t(s.x0.size()) == clip, "data sample ", item, " has ", s.x0.size(), " values, expected ", clip);
    std::copy(s.x0.begin(), s.x0.end(), batch.x0.begin() + b * clip);
    if (item == hooks_.inject_inf_data)  // testing aid
      batch.x0[size_t(b * clip + clip / 2)] = std::numeric_limits<float>::infinity();
    if (dropout_.p > 0 && rng.uniform() < dropout_.p) {
      if (s.context.empty())
        s.caption.clear();
      else
        s.context = dropout_.empty;
    }
    float* context = batch.context.data() + b * ctx;  // [text_len, text_dim]
    const std::vector<float>* rows = &s.context;      // [L, text_dim]: a cache's, or the caption's through t5
    if (rows->empty() && t5_) {
      auto it = encoded_.find(s.caption);
      if (it == encoded_.end()) it = encoded_.emplace(s.caption, t5_->encode(s.caption).context).first;
      rows = &it->second;
    }
    if (rows->empty()) {
      embed_caption(s.caption, cfg_.text_len, cfg_.text_dim, context);
    } else {  // zero-padded to text_len as Wan does
      std::copy(rows->begin(), rows->end(), context);
      std::fill(context + rows->size(), context + ctx, 0.0f);
    }
    const double t = sample_timestep(flow_, d.H, d.W, rng);
    for (int64_t r = 0; r < d.time_rows; ++r)
      batch.timesteps[size_t(b * d.time_rows + r)] = r < d.cond_frames ? 0.0f : float(t * 1000.0);
    for (int64_t i = 0; i < clip; ++i) noise_[size_t(b * clip + i)] = float(rng.normal());
    make_flow_pair(batch.x0.data() + b * clip, noise_.data() + b * clip, t, batch.xt.data() + b * clip,
                   batch.target.data() + b * clip, clip);
    const int64_t run = d.F * d.H * d.W, cond = d.cond_frames * d.H * d.W;  // each channel's run; its clean start
    for (int64_t c = 0; c < cfg_.in_dim && cond; ++c)
      std::copy_n(batch.x0.data() + b * clip + c * run, cond, batch.xt.data() + b * clip + c * run);
    MS_CHECK(rng.state() == start.state_after(uint64_t((j + 1) * draws)), "a clip drew other than ", draws,
             " random numbers");
  }
  rng.set_state(start.state_after(uint64_t(at.clips * draws)));
  return at.clips;
}

}  // namespace ms
