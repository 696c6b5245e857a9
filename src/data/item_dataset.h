// Base of the file-backed datasets (video clips, latent cache): a fixed list of items, visited in a
// seeded shuffled order per epoch, and the --on-bad-data policy.
//
// Bad data (an unreadable, corrupt or too-short file, non-finite latents) found while listing or
// loading is logged by name and skipped (skip), or stops the run with its error (fatal). A skipped
// item is replaced by the next good item in list order, so sample i stays a pure function of
// (seed, i, the files); a dataset whose every item is bad is an error naming the first problem.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ms {

class ItemDataset : public Dataset {
 public:
  DataSample get(int64_t index) final;

 protected:
  // name: what errors call the dataset (its file); fatal: --on-bad-data fatal.
  ItemDataset(std::string name, bool fatal, uint64_t seed) : name_(std::move(name)), fatal_(fatal), seed_(seed) {}

  const std::string& name() const { return name_; }
  // Sets the number of items once the subclass has listed them; zero items is an error.
  void set_count(int64_t n);
  // Loads item k in [0, count); throws ms::Error naming the file when it is bad.
  virtual DataSample load(int64_t item) = 0;
  // A bad file found while listing: logged and left out (skip) or thrown (fatal).
  void bad(const std::string& problem);

 private:
  int64_t item_at(int64_t index);  // index -> item through the epoch's permutation

  std::string name_;
  bool fatal_;
  uint64_t seed_;
  int64_t count_ = 0;
  std::vector<char> bad_;       // [count] items found bad while loading
  std::string first_problem_;   // kept for the all-bad error
  int64_t epoch_ = -1;          // epoch whose order_ is cached
  std::vector<int64_t> order_;  // [count] permutation of items for epoch_
};

}  // namespace ms
