// Training data: the interface the trainer draws clips from, and the factory for --data.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace ms {

// The clip shape every sample of a dataset has: the model's input layout [C, F, H, W].
struct DataShape {
  int64_t channels = 0, frames = 0, height = 0, width = 0;
};

// The shape of a batch's clips and how many clips it has.
struct BatchShape {
  DataShape shape;
  int64_t clips = 0;
};

struct DataSample {
  std::vector<float> x0;       // [C, F, H, W] clean input (pixels in [-1, 1], or latents)
  std::string caption;         // embedded by embed_caption when context is empty
  std::vector<float> context;  // [L, text_dim] cached text embedding (latent caches), L <= text_len
};

// Samples are drawn in order: a run's data position is the number drawn so far. Batches are runs of consecutive
// samples of one clip shape (a bucket); what sits at a position is a pure function of the seed, the position and the
// files, so a resumed run draws exactly what an uninterrupted one would.
class Dataset {
 public:
  virtual ~Dataset() = default;
  // Every clip shape of the batches, each with the largest batch drawn at it; sorted by shape.
  virtual std::vector<BatchShape> batch_shapes() const = 0;
  // The batch that starts at data position p: its clip shape and size; samples p .. p + clips - 1 make it.
  virtual BatchShape batch_at(int64_t position) = 0;
  // The sample at data position p (any p >= 0: epochs continue past the end).
  virtual DataSample get(int64_t position) = 0;
  // Samples per epoch (an epoch ends where a batch does); 0 for generated data, which has no epochs.
  virtual int64_t epoch_size() const { return 0; }
  // Whether samples carry cached text embeddings (context) rather than captions.
  virtual bool cached_text() const { return false; }
  // Captions of the data to sample when the run is given no prompts (none: the run samples nothing by itself).
  virtual std::vector<std::string> sample_prompts() const { return {}; }
};

// A dataset whose samples all have one shape and come `batch` at a time: the generated sources.
class OneShapeDataset : public Dataset {
 public:
  virtual DataShape shape() const = 0;
  std::vector<BatchShape> batch_shapes() const final { return {{shape(), batch_}}; }
  BatchShape batch_at(int64_t) final { return {shape(), batch_}; }
  void set_batch(int64_t clips) { batch_ = clips; }

 private:
  int64_t batch_ = 1;
};

// What an unreadable, corrupt or too-short data file does: skip (logged, left out) or fatal (the run stops).
enum class BadDataPolicy { skip, fatal };
template <>
struct EnumNames<BadDataPolicy> {
  static constexpr std::array<EnumName<BadDataPolicy>, 2> values{
      {{BadDataPolicy::skip, "skip"}, {BadDataPolicy::fatal, "fatal"}}};
};

struct DataOptions {
  std::string source = "synthetic";  // synthetic | synthetic-new-colours | moving-mnist | path to a dataset .toml
  int64_t batch_size = 0;            // clips per batch; 0: a TOML entry's batch_size (else 1, as musubi-tuner), else 2
  int64_t ranks = 1;      // a distributed run's ranks: batches are `ranks` times batch_size (the global batch)
  std::string mnist_dir;  // moving-mnist: the IDX files ("": $MEGASLIDE_DATA or ~/.cache/megaslide)
  BadDataPolicy on_bad_data = BadDataPolicy::skip;  // an unreadable, corrupt or too-short file
  uint64_t seed = 0;
  int64_t frames = 0, height = 0, width = 0;            // requested clip size (0: the data's own)
  int64_t in_dim = 3, text_len = 512, text_dim = 4096;  // the model's
};

// Whether --data names the built-in shapes (synthetic, synthetic-new-colours) or any generated source (they and
// moving-mnist): no file behind them.
bool is_synthetic_shapes(const std::string& source);
bool is_generated_data(const std::string& source);

// Opens --data. A requested nonzero size selects among the shapes the data holds (a TOML's target_frames /
// resolution, a latent cache's shapes) and must agree with at least one; Moving-MNIST and synthetic take any
// requested size. The sample channels must equal in_dim. Throws ms::Error naming the problem and the fix.
std::unique_ptr<Dataset> open_dataset(const DataOptions& o);

}  // namespace ms
