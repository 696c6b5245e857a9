// Base of the file-backed datasets (video clips, latent caches): a fixed list of items, each of one clip shape and
// batch size, drawn in bucketed batches, and the --on-bad-data policy.
//
// Buckets: the items of one clip shape and batch size. Each epoch visits every item once: each bucket's items are
// shuffled and cut into batches of its batch size (the last may be smaller), and the batches of all buckets are
// shuffled together, all by a generator seeded with (seed, epoch), as musubi-tuner's BucketBatchManager does. A
// batch never spans two epochs, so an epoch is `count` samples.
//
// Bad data (an unreadable, corrupt or too-short file, non-finite latents) found while listing or loading is logged
// by name and skipped (skip), or stops the run with its error (fatal). An item found bad while loading is replaced by
// the next good item of its bucket in list order, so what sits at a data position stays a pure function of
// (seed, position, the files) and a batch keeps its shape; a bucket whose every item is bad is an error naming the
// first problem.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "data/dataset.h"

namespace ms {

class ItemDataset : public Dataset {
 public:
  std::vector<BatchShape> batch_shapes() const final;
  BatchShape batch_at(int64_t position) final;
  DataSample get(int64_t position) final;
  int64_t epoch_size() const final { return int64_t(slot_item_.size()); }

 protected:
  // name: what errors call the dataset (its file); fatal: --on-bad-data fatal.
  ItemDataset(std::string name, bool fatal, uint64_t seed) : name_(std::move(name)), fatal_(fatal), seed_(seed) {}

  const std::string& name() const { return name_; }
  // Lists the subclass's item `item` (its own index) with clip shape `shape`, drawn `batch` at a time; an item
  // listed k times appears k times per epoch (num_repeats).
  void add(int64_t item, const DataShape& shape, int64_t batch);
  // Ends the listing; no items is an error naming the first problem found.
  void finish_listing();
  // Loads the subclass's item; throws ms::Error naming the file when it is bad.
  virtual DataSample load(int64_t item) = 0;
  // A bad file found while listing: logged and left out (skip) or thrown (fatal).
  void bad(const std::string& problem);

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;  // C, F, H, W, batch
  struct Bucket {
    DataShape shape;
    int64_t batch;
    std::vector<int64_t> slots;  // into slot_item_, in listing order
  };
  struct Epoch {
    int64_t index = -1;
    std::vector<int64_t> order;    // [count] slots in drawing order
    std::vector<int64_t> starts;   // offset in `order` of each batch, ascending
    std::vector<int64_t> buckets;  // the bucket of each batch
  };
  void plan_epoch(int64_t epoch);  // fills epoch_ for `epoch`

  std::string name_;
  bool fatal_;
  uint64_t seed_;
  std::map<Key, int64_t> bucket_of_;  // listing: key -> index into buckets_
  std::vector<Bucket> buckets_;       // sorted by key once listed
  std::vector<int64_t> slot_item_;    // [count] the subclass's item of each slot
  std::vector<int64_t> slot_bucket_;  // [count]
  std::vector<int64_t> slot_rank_;    // [count] position of the slot in its bucket's list
  std::set<int64_t> bad_items_;       // items found bad while loading
  std::string first_problem_;         // kept for the all-bad error
  Epoch epoch_;
};

}  // namespace ms
