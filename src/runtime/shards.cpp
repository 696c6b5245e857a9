#include "runtime/shards.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace ms {

Shards::Shards(const ParamTable& table, int rank, int ranks) : rank_(rank), ranks_(ranks) {
  MS_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "rank ", rank, " of ", ranks);
  for (const StageInfo& st : table.stages()) {
    StageShard sh;
    sh.chunk = (st.numel + ranks - 1) / ranks;
    sh.begin = std::min(st.numel, rank * sh.chunk);
    sh.count = std::min(st.numel, sh.begin + sh.chunk) - sh.begin;
    sh.offset = ranks == 1 ? st.offset : total_;
    total_ += sh.count;
    max_count_ = std::max(max_count_, sh.count);
    max_padded_ = std::max(max_padded_, ranks * sh.chunk);
    stages_.push_back(sh);
  }
  if (ranks == 1) total_ = table.total();
}

void gather_stages(Communicator& comm, const ParamTable& table, const Shards& shards, const uint16_t* shard,
                   uint16_t* full) {
  std::vector<uint16_t> padded(size_t(shards.max_padded()));  // [ranks x chunk]
  for (size_t s = 0; s < table.stages().size(); ++s) {
    const StageShard& sh = shards.stage(s);
    const StageInfo& st = table.stages()[s];
    std::memcpy(padded.data() + shards.rank() * sh.chunk, shard + sh.offset, size_t(sh.count) * 2);
    comm.allgather(Channel::weights, padded.data(), size_t(sh.chunk) * 2);
    std::memcpy(full + st.offset, padded.data(), size_t(st.numel) * 2);
  }
}

void gather_to_lead(Communicator& comm, const ParamTable& table, const Shards& shards, const uint16_t* shard,
                    const std::function<void(size_t s, int64_t begin, const uint16_t* values, int64_t n)>& sink) {
  const int N = shards.ranks(), r = shards.rank();
  const int64_t round = std::max<int64_t>(1, (int64_t(32) << 20) / N);  // elements per rank: 64 MiB in all
  std::vector<uint16_t> parts(size_t(N * std::min(round, shards.max_padded() / N)));
  for (size_t s = 0; s < table.stages().size(); ++s) {
    const StageShard& sh = shards.stage(s);
    const int64_t numel = table.stages()[s].numel;
    for (int64_t k = 0; k < sh.chunk; k += round) {
      const int64_t n = std::min(round, sh.chunk - k);  // this round's elements per rank, the same on every rank
      const int64_t mine = std::clamp<int64_t>(sh.count - k, 0, n);
      if (mine > 0) std::memcpy(parts.data() + r * n, shard + sh.offset + k, size_t(mine) * 2);
      comm.allgather(Channel::weights, parts.data(), size_t(n) * 2);
      if (r != 0) continue;
      for (int j = 0; j < N; ++j) {
        const int64_t begin = j * sh.chunk + k, real = std::clamp<int64_t>(numel - begin, 0, n);
        if (real > 0) sink(s, begin, parts.data() + j * n, real);
      }
    }
  }
}

void reduce_stages(Communicator& comm, const ParamTable& table, const Shards& shards, const float* full, float* shard,
                   std::span<const float> rank_weight) {
  std::vector<float> padded(size_t(shards.max_padded()));  // [ranks x chunk]
  for (size_t s = 0; s < table.stages().size(); ++s) {
    const StageShard& sh = shards.stage(s);
    const StageInfo& st = table.stages()[s];
    std::memcpy(padded.data(), full + st.offset, size_t(st.numel) * 4);
    std::fill(padded.begin() + st.numel, padded.begin() + shards.ranks() * sh.chunk, 0.0f);
    comm.reduce_scatter(Channel::grads, padded.data(), sh.chunk, rank_weight);
    std::memcpy(shard + sh.offset, padded.data() + shards.rank() * sh.chunk, size_t(sh.count) * 4);
  }
}

}  // namespace ms
