// How the ranks of a distributed run split the host state (docs/distributed.md), ZeRO-style: every stage's span of
// the parameter table is cut into `ranks` equal chunks (the last short or empty where the stage does not divide),
// and rank r keeps chunk r of every stage in its pools, stage after stage. One rank owns everything, at the
// table's own offsets.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/param_table.h"
#include "runtime/communicator.h"

namespace ms {

struct StageShard {
  int64_t chunk = 0;   // elements per rank: ceil(stage numel / ranks)
  int64_t begin = 0;   // this rank's first element, from the stage's start (rank * chunk, capped at its numel)
  int64_t count = 0;   // elements this rank owns (chunk, or fewer for the last ranks)
  int64_t offset = 0;  // where they start in this rank's pools
};

class Shards {
 public:
  Shards(const ParamTable& table, int rank, int ranks);
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  const StageShard& stage(size_t s) const { return stages_[s]; }
  int64_t total() const { return total_; }            // elements in this rank's pools
  int64_t max_count() const { return max_count_; }    // the largest stage's share
  int64_t max_padded() const { return max_padded_; }  // ranks x the largest chunk: a stage's gathered span

 private:
  int rank_, ranks_;
  std::vector<StageShard> stages_;
  int64_t total_ = 0, max_count_ = 0, max_padded_ = 0;
};

// Every rank's bf16 shard (`shard`: this rank's pool) gathered into the whole table's weights full [P], stage by stage
// on the weights channel.
void gather_stages(Communicator& comm, const ParamTable& table, const Shards& shards, const uint16_t* shard,
                   uint16_t* full);
// Every rank's bf16 shards (`shard`: this rank's pool) brought to rank 0 stage by stage, in rounds that hold 64 MiB
// whatever the rank count (an all-gather on the weights channel, so every rank calls it): on rank 0 only,
// sink(s, begin, values, n) receives the elements [begin, begin + n) of stage s. What a checkpoint or a sample of a
// distributed run reads, without any rank holding the whole model.
void gather_to_lead(Communicator& comm, const ParamTable& table, const Shards& shards, const uint16_t* shard,
                    const std::function<void(size_t s, int64_t begin, const uint16_t* values, int64_t n)>& sink);
// The ranks' gradients full [P] weighted by rank_weight and summed (Communicator::reduce_scatter), stage by stage on
// the grads channel: this rank's shard of the sum into `shard` (its pool layout).
void reduce_stages(Communicator& comm, const ParamTable& table, const Shards& shards, const float* full, float* shard,
                   std::span<const float> rank_weight);

}  // namespace ms
