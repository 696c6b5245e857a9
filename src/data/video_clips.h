// Video files with captions, from the video entries of a dataset TOML (docs/data.md): each video
// yields the clips its entry's frame_extraction picks; clips are decoded on demand, resized and
// centre-cropped to the resolution, and mapped to [-1, 1] RGB [3, F, H, W].
#pragma once
#include <string>
#include <vector>

#include "data/dataset_toml.h"
#include "data/item_dataset.h"

namespace ms {

class VideoClips : public ItemDataset {
 public:
  // entries: the file's video entries; shape: [3, F, H, W] every clip is made into.
  VideoClips(const DatasetFile& file, const std::vector<DatasetEntry>& entries, DataShape shape, bool fatal,
             uint64_t seed);

  DataShape shape() const override { return shape_; }
  int64_t batch_size() const override { return batch_size_; }

 protected:
  DataSample load(int64_t item) override;

 private:
  struct Video {
    std::string path, caption;
  };
  struct Clip {
    int64_t video, start;  // index into videos_, first frame
  };
  std::vector<Video> list(const DatasetEntry& e) const;

  DataShape shape_;
  int64_t batch_size_;
  std::vector<Video> videos_;
  std::vector<Clip> clips_;  // num_repeats copies of each
};

}  // namespace ms
