#include "data/dataset.h"

#include "core/check.h"
#include "data/dataset_toml.h"
#include "data/latent_cache.h"
#include "data/mnist_idx.h"
#include "data/moving_mnist.h"
#include "data/synthetic_shapes.h"
#include "data/video_clips.h"

namespace ms {
namespace {

class Synthetic : public OneShapeDataset {
 public:
  explicit Synthetic(SyntheticShapesConfig c) : cfg_(c), data_(c) {}
  DataShape shape() const override { return {3, cfg_.frames, cfg_.height, cfg_.width}; }
  DataSample get(int64_t index) override {
    VideoSample v = data_.get(index);
    return {std::move(v.video), std::move(v.caption), {}};
  }
  std::vector<std::string> sample_prompts() const override { return data_.sample_captions(); }

 private:
  SyntheticShapesConfig cfg_;
  SyntheticShapes data_;
};

std::unique_ptr<Dataset> open_toml(const DataOptions& o) {
  const DatasetFile file = read_dataset_toml(o.source);
  std::vector<DatasetEntry> videos, caches;
  for (const DatasetEntry& e : file.datasets) (e.cache_directory.empty() ? videos : caches).push_back(e);
  if (!videos.empty() && !caches.empty())
    MS_FAIL("'", file.path, "' mixes video and latent-cache entries; one run trains on one kind (split the file)");
  if (!caches.empty()) return std::make_unique<LatentCache>(file, caches, o);
  for (const DatasetEntry& e : videos) check_file_entry(file, e);
  return std::make_unique<VideoClips>(file, videos, o);
}

}  // namespace

bool is_synthetic_shapes(const std::string& source) {
  return source == "synthetic" || source == "synthetic-new-colours";
}

bool is_generated_data(const std::string& source) { return is_synthetic_shapes(source) || source == "moving-mnist"; }

std::unique_ptr<Dataset> open_dataset(const DataOptions& o) {
  std::unique_ptr<Dataset> d;
  if (is_generated_data(o.source)) {
    std::unique_ptr<OneShapeDataset> g;
    if (is_synthetic_shapes(o.source))
      g = std::make_unique<Synthetic>(SyntheticShapesConfig{.frames = o.frames > 0 ? o.frames : 4,
                                                            .height = o.height > 0 ? o.height : 16,
                                                            .width = o.width > 0 ? o.width : 16,
                                                            .seed = o.seed,
                                                            .new_colours = o.source == "synthetic-new-colours"});
    else
      g = std::make_unique<MovingMnist>(read_mnist(mnist_dir(o.mnist_dir)), o.frames, o.height, o.width, o.seed);
    g->set_batch((o.batch_size > 0 ? o.batch_size : 2) * o.ranks);
    d = std::move(g);
  } else if (o.source.size() > 5 && o.source.ends_with(".toml")) {
    d = open_toml(o);
  } else {
    MS_FAIL("--data '", o.source,
            "' is unknown; use synthetic, synthetic-new-colours, moving-mnist or a dataset .toml file (docs/data.md)");
  }
  const DataShape s = d->batch_shapes().front().shape;
  if (s.channels != o.in_dim)
    MS_FAIL("--data ", o.source, " is RGB video in pixel space (3 channels) but the model's in_dim is ", o.in_dim,
            "; use --model tiny or a config with in_dim 3, or a latent cache");
  return d;
}

}  // namespace ms
