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

class Synthetic : public Dataset {
 public:
  explicit Synthetic(SyntheticShapesConfig c) : cfg_(c), data_(c) {}
  DataShape shape() const override { return {3, cfg_.frames, cfg_.height, cfg_.width}; }
  DataSample get(int64_t index) override {
    VideoSample v = data_.get(index);
    return {std::move(v.video), std::move(v.caption), {}};
  }

 private:
  SyntheticShapesConfig cfg_;
  SyntheticShapes data_;
};

// A size the data file fixes (`given`, 0: not set) against the one requested on the command line.
int64_t agree(int64_t given, int64_t requested, const char* flag, const char* key, const std::string& file) {
  if (given > 0 && requested > 0 && given != requested)
    MS_FAIL(flag, " ", requested, " differs from ", key, " ", given, " in '", file, "'; drop ", flag,
            " or change the file");
  return given > 0 ? given : requested;
}

std::unique_ptr<Dataset> open_toml(const DataOptions& o) {
  const DatasetFile file = read_dataset_toml(o.source);
  std::vector<DatasetEntry> videos, caches;
  for (const DatasetEntry& e : file.datasets) (e.cache_directory.empty() ? videos : caches).push_back(e);
  if (!videos.empty() && !caches.empty())
    MS_FAIL("'", file.path, "' mixes video and latent-cache entries; one run trains on one kind (split the file)");
  if (!caches.empty()) return std::make_unique<LatentCache>(file, caches, o);
  const DatasetEntry& e = videos[0];
  for (const DatasetEntry& v : videos)
    if (v.target_frames != e.target_frames || v.height != e.height || v.width != e.width)
      MS_FAIL("'", file.path,
              "': the [[datasets]] entries set different target_frames or resolution; "
              "every clip of a run has one shape (set them once in [general])");
  const DataShape shape{3, agree(e.target_frames, o.frames, "--frames", "target_frames", file.path),
                        agree(e.height, o.height, "--height", "the resolution height", file.path),
                        agree(e.width, o.width, "--width", "the resolution width", file.path)};
  if (shape.frames == 0) MS_FAIL("'", file.path, "' sets no target_frames; add target_frames = N or pass --frames N");
  if (shape.height == 0 || shape.width == 0)
    MS_FAIL("'", file.path, "' sets no resolution; add resolution = [W, H] in [general] or pass --width and --height");
  return std::make_unique<VideoClips>(file, videos, shape, o.on_bad_data == BadDataPolicy::fatal, o.seed);
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const DataOptions& o) {
  std::unique_ptr<Dataset> d;
  if (o.source == "synthetic") {
    d = std::make_unique<Synthetic>(SyntheticShapesConfig{o.frames > 0 ? o.frames : 6, o.height > 0 ? o.height : 24,
                                                          o.width > 0 ? o.width : 24, o.seed});
  } else if (o.source == "moving-mnist") {
    d = std::make_unique<MovingMnist>(read_mnist(mnist_dir(o.mnist_dir)), o.frames, o.height, o.width, o.seed);
  } else if (o.source.size() > 5 && o.source.ends_with(".toml")) {
    d = open_toml(o);
  } else {
    MS_FAIL("--data '", o.source, "' is unknown; use synthetic, moving-mnist or a dataset .toml file (docs/data.md)");
  }
  const DataShape s = d->shape();
  if (s.channels != o.in_dim)
    MS_FAIL("--data ", o.source, " is RGB video in pixel space (3 channels) but the model's in_dim is ", o.in_dim,
            "; use --model tiny or a config with in_dim 3, or a latent cache");
  return d;
}

}  // namespace ms
