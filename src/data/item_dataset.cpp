#include "data/item_dataset.h"

#include <algorithm>

#include "core/check.h"
#include "core/log.h"
#include "core/rng.h"

namespace ms {

void ItemDataset::add(int64_t item, const DataShape& shape, int64_t batch) {
  MS_CHECK(batch >= 1, "batch size must be positive, got ", batch);
  const Key key{shape.channels, shape.frames, shape.height, shape.width, batch};
  auto [it, added] = bucket_of_.emplace(key, int64_t(buckets_.size()));
  if (added) buckets_.push_back({shape, batch, {}});
  buckets_[size_t(it->second)].slots.push_back(int64_t(slot_item_.size()));
  slot_item_.push_back(item);
}

void ItemDataset::finish_listing() {
  if (slot_item_.empty())
    MS_FAIL(name_, ": no usable clips", first_problem_.empty() ? std::string() : "; first problem: " + first_problem_);
  // Buckets in key order, so the drawing order does not depend on which shape was listed first.
  std::vector<Bucket> sorted;
  for (const auto& [key, index] : bucket_of_) sorted.push_back(std::move(buckets_[size_t(index)]));
  buckets_ = std::move(sorted);
  slot_bucket_.assign(slot_item_.size(), 0);
  slot_rank_.assign(slot_item_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t r = 0; r < buckets_[b].slots.size(); ++r) {
      slot_bucket_[size_t(buckets_[b].slots[r])] = int64_t(b);
      slot_rank_[size_t(buckets_[b].slots[r])] = int64_t(r);
    }
}

void ItemDataset::bad(const std::string& problem) {
  if (fatal_) MS_FAIL(problem, " (--on-bad-data fatal; use --on-bad-data skip to leave such files out)");
  if (first_problem_.empty()) first_problem_ = problem;
  log_warn("skipping bad data: ", problem);
}

std::vector<BatchShape> ItemDataset::batch_shapes() const {
  std::vector<BatchShape> out;  // buckets are sorted by shape, then batch: keep each shape's largest batch
  for (const Bucket& b : buckets_) {
    const bool same_shape = !out.empty() && out.back().shape.channels == b.shape.channels &&
                            out.back().shape.frames == b.shape.frames && out.back().shape.height == b.shape.height &&
                            out.back().shape.width == b.shape.width;
    const int64_t clips = std::min<int64_t>(b.batch, int64_t(b.slots.size()));
    if (same_shape)
      out.back().clips = std::max(out.back().clips, clips);
    else
      out.push_back({b.shape, clips});
  }
  return out;
}

void ItemDataset::plan_epoch(int64_t epoch) {
  Rng rng(seed_ * 0xd1b54a32d192ed03ull + uint64_t(epoch) * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull);
  auto shuffle = [&rng](auto& v) {  // Fisher-Yates
    for (int64_t i = int64_t(v.size()) - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(rng.below(i + 1))]);
  };
  struct Cut {
    int64_t bucket, begin, end;  // slots [begin, end) of the bucket's shuffled list
  };
  std::vector<std::vector<int64_t>> lists;
  std::vector<Cut> batches;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<int64_t> slots = buckets_[b].slots;
    shuffle(slots);
    for (int64_t i = 0; i < int64_t(slots.size()); i += buckets_[b].batch)
      batches.push_back({int64_t(b), i, std::min<int64_t>(i + buckets_[b].batch, int64_t(slots.size()))});
    lists.push_back(std::move(slots));
  }
  shuffle(batches);
  epoch_ = Epoch{epoch, {}, {}, {}};
  for (const Cut& c : batches) {
    epoch_.starts.push_back(int64_t(epoch_.order.size()));
    epoch_.buckets.push_back(c.bucket);
    const auto& list = lists[size_t(c.bucket)];
    epoch_.order.insert(epoch_.order.end(), list.begin() + c.begin, list.begin() + c.end);
  }
}

BatchShape ItemDataset::batch_at(int64_t position) {
  MS_CHECK(position >= 0 && !slot_item_.empty(), "data position must be >= 0, got ", position);
  const int64_t count = int64_t(slot_item_.size()), epoch = position / count, offset = position % count;
  if (epoch != epoch_.index) plan_epoch(epoch);
  const auto at = std::lower_bound(epoch_.starts.begin(), epoch_.starts.end(), offset);
  if (at == epoch_.starts.end() || *at != offset)
    MS_FAIL(name_, ": data position ", position,
            " does not start a batch: the run was saved by a megaslide that ordered its data differently; start a new "
            "run (--out)");
  const size_t k = size_t(at - epoch_.starts.begin());
  const int64_t end = k + 1 < epoch_.starts.size() ? epoch_.starts[k + 1] : count;
  return {buckets_[size_t(epoch_.buckets[k])].shape, end - offset};
}

DataSample ItemDataset::get(int64_t position) {
  MS_CHECK(position >= 0 && !slot_item_.empty(), "data position must be >= 0, got ", position);
  const int64_t count = int64_t(slot_item_.size()), epoch = position / count;
  if (epoch != epoch_.index) plan_epoch(epoch);
  const int64_t slot = epoch_.order[size_t(position % count)];
  const std::vector<int64_t>& list = buckets_[size_t(slot_bucket_[size_t(slot)])].slots;
  const int64_t n = int64_t(list.size()), rank = slot_rank_[size_t(slot)];
  for (int64_t k = 0; k < n; ++k) {  // the slot's item, else the next good one of its bucket
    const int64_t item = slot_item_[size_t(list[size_t((rank + k) % n)])];
    if (bad_items_.count(item)) continue;
    try {
      return load(item);
    } catch (const Error& e) {
      bad_items_.insert(item);
      bad(e.what());
    }
  }
  MS_FAIL(name_, ": every clip of a bucket is unreadable or unusable; first problem: ", first_problem_);
}

}  // namespace ms
