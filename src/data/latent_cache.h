// A latent cache: one .safetensors file per clip holding `latents` [C, F, H, W] (the model's input,
// e.g. VAE latents) and `context` [L, text_dim] (the clip's text-encoder output, L <= text_len), any
// float dtype. The files of a cache_directory are read in name order; every file must match the
// model (C = in_dim, text_dim) and one clip shape, which the first good file fixes unless the caller
// gives it. A file that breaks these, cannot be read or holds non-finite values is bad data.
#pragma once
#include <string>
#include <vector>

#include "data/dataset_toml.h"
#include "data/item_dataset.h"
#include "io/safetensors.h"

namespace ms {

class LatentCache : public ItemDataset {
 public:
  // entries: the file's cache entries; o: the model's in_dim/text_len/text_dim and any requested F/H/W.
  LatentCache(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o);

  DataShape shape() const override { return shape_; }
  int64_t batch_size() const override { return batch_size_; }

 protected:
  DataSample load(int64_t item) override;

 private:
  void check(const SafetensorsFile& f);  // validates one file's shapes, fixing shape_ from the first

  DataShape shape_;
  int64_t batch_size_, text_len_, text_dim_;
  std::vector<std::string> files_;  // valid files
  std::vector<int64_t> items_;      // index into files_, num_repeats copies of each
};

}  // namespace ms
