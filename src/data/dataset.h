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

struct DataSample {
  std::vector<float> x0;       // [C, F, H, W] clean input (pixels in [-1, 1], or latents)
  std::string caption;         // embedded by embed_caption when context is empty
  std::vector<float> context;  // [L, text_dim] cached text embedding (latent caches), L <= text_len
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual DataShape shape() const = 0;
  // batch_size from the data file; 0 when it does not say.
  virtual int64_t batch_size() const { return 0; }
  // Sample `index` (any index >= 0; epochs continue past the end): a pure function of the seed and
  // index, so a resumed run draws exactly what an uninterrupted one would.
  virtual DataSample get(int64_t index) = 0;
};

// What an unreadable, corrupt or too-short data file does: skip (logged, left out) or fatal (the run stops).
enum class BadDataPolicy { skip, fatal };
template <>
struct EnumNames<BadDataPolicy> {
  static constexpr std::array<EnumName<BadDataPolicy>, 2> values{
      {{BadDataPolicy::skip, "skip"}, {BadDataPolicy::fatal, "fatal"}}};
};

struct DataOptions {
  std::string source = "synthetic";  // synthetic | moving-mnist | path to a dataset .toml
  std::string mnist_dir;             // moving-mnist: the IDX files ("": $MEGASLIDE_DATA or ~/.cache/megaslide)
  BadDataPolicy on_bad_data = BadDataPolicy::skip;  // an unreadable, corrupt or too-short file
  uint64_t seed = 0;
  int64_t frames = 0, height = 0, width = 0;            // requested clip size (0: the data's own)
  int64_t in_dim = 3, text_len = 512, text_dim = 4096;  // the model's
};

// Opens --data. A size the data fixes (a TOML's target_frames / resolution, a latent cache's shape)
// must agree with a requested nonzero size; Moving-MNIST and synthetic take any requested size.
// The sample channels must equal in_dim. Throws ms::Error naming the problem and the fix.
std::unique_ptr<Dataset> open_dataset(const DataOptions& o);

}  // namespace ms
