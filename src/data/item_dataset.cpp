#include "data/item_dataset.h"

#include <numeric>

#include "core/check.h"
#include "core/log.h"
#include "core/rng.h"

namespace ms {

void ItemDataset::set_count(int64_t n) {
  if (n == 0)
    MS_FAIL(name_, ": no usable clips", first_problem_.empty() ? std::string() : "; first problem: " + first_problem_);
  count_ = n;
  bad_.assign(size_t(n), 0);
}

void ItemDataset::bad(const std::string& problem) {
  if (fatal_) MS_FAIL(problem, " (--on-bad-data fatal; use --on-bad-data skip to leave such files out)");
  if (first_problem_.empty()) first_problem_ = problem;
  log_warn("skipping bad data: ", problem);
}

int64_t ItemDataset::item_at(int64_t index) {
  MS_CHECK(index >= 0, "dataset index must be >= 0, got ", index);
  const int64_t epoch = index / count_;
  if (epoch != epoch_) {  // Fisher-Yates with a generator seeded by (seed, epoch)
    Rng rng(seed_ * 0xd1b54a32d192ed03ull + uint64_t(epoch) * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull);
    order_.resize(size_t(count_));
    std::iota(order_.begin(), order_.end(), int64_t(0));
    for (int64_t i = count_ - 1; i > 0; --i) std::swap(order_[size_t(i)], order_[size_t(rng.below(i + 1))]);
    epoch_ = epoch;
  }
  return order_[size_t(index % count_)];
}

DataSample ItemDataset::get(int64_t index) {
  MS_CHECK(count_ > 0, "ItemDataset::get before set_count");
  const int64_t first = item_at(index);
  for (int64_t k = 0; k < count_; ++k) {
    const int64_t item = (first + k) % count_;
    if (bad_[size_t(item)]) continue;
    try {
      return load(item);
    } catch (const Error& e) {
      bad_[size_t(item)] = 1;
      bad(e.what());
    }
  }
  MS_FAIL(name_, ": every clip is unreadable or unusable; first problem: ", first_problem_);
}

}  // namespace ms
