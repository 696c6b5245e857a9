// Video files with captions, from the video entries of a dataset TOML (docs/data.md): each video yields the clips its
// entry's frame_extraction picks (after dropping frames to 16 fps when source_fps is given); clips are decoded on
// demand, resized and centre-cropped to the entry's resolution (or the video's bucket resolution with
// enable_bucket), and mapped to [-1, 1] RGB [3, F, H, W]. Each clip shape and batch size is a bucket.
#pragma once
#include <string>
#include <vector>

#include "data/dataset_toml.h"
#include "data/item_dataset.h"

namespace ms {

class VideoClips : public ItemDataset {
 public:
  // entries: the file's video entries (each with a resolution and, but for full, target_frames); o: the requested
  // clip size (nonzero extents keep only the clips that agree), batch size, bad-data policy and seed.
  VideoClips(const DatasetFile& file, const std::vector<DatasetEntry>& entries, const DataOptions& o);

  // A listed clip and where it comes from (what `megaslide cache` names its latent file after).
  struct ClipSource {
    std::string path;             // the video or image file
    std::string cache_directory;  // its entry's ("": none given)
    bool image = false;
    int64_t start = 0;                            // first frame, of the kept ones (source_fps)
    int64_t source_width = 0, source_height = 0;  // the file's frame size, before resizing
    DataShape shape;                              // [3, F, H, W] as loaded
    std::string caption;                          // the file's
  };
  // Every listed clip once (num_repeats aside), in listing order; clip(i) loads sources()[i].
  std::vector<ClipSource> sources() const;
  DataSample clip(int64_t i) { return load(i); }

 protected:
  DataSample load(int64_t item) override;

 private:
  struct Video {
    std::string path, caption;
    std::vector<int64_t> frames;    // the source frames kept (source_fps), in order; empty: every frame
    int64_t width = 0, height = 0;  // the file's frame size
    std::string cache_directory;
    bool image = false;
  };
  struct Clip {
    int64_t video, start;  // index into videos_, first frame (of the kept ones)
    DataShape shape;       // [3, F, H, W]
  };
  std::vector<Video> list(const DatasetEntry& e) const;

  std::vector<Video> videos_;
  std::vector<Clip> clips_;
};

}  // namespace ms
