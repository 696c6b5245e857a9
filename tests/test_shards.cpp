// The sharded host state of distributed runs (runtime/shards.h) and the collectives built on Communicator, checked
// without MPI: ranks are threads of this process exchanging through shared memory (ThreadRanks), so these run under
// every sanitizer. The MPI path end to end: test_distributed.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "runtime/communicator.h"
#include "runtime/shards.h"
#include "small_config.h"
#include "thread_ranks.h"

namespace ms {
namespace {

using test::ThreadRanks;

// Every stage's elements are owned by exactly one rank, in rank order, and each rank's pools are its chunks in
// stage order; one rank owns the table as it is.
TEST(Shards, EveryElementHasOneOwner) {
  const ParamTable table(test::small_config());
  for (int ranks : {1, 2, 3, 7, 64}) {
    std::vector<int> owner(size_t(table.total()), -1);
    int64_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      const Shards sh(table, r, ranks);
      int64_t offset = 0;
      for (size_t s = 0; s < table.stages().size(); ++s) {
        const StageShard& c = sh.stage(s);
        EXPECT_EQ(c.offset, ranks == 1 ? table.stages()[s].offset : offset);
        offset += c.count;
        for (int64_t i = 0; i < c.count; ++i) {
          int& o = owner[size_t(table.stages()[s].offset + c.begin + i)];
          EXPECT_EQ(o, -1) << "element owned twice";
          o = r;
        }
        EXPECT_LE(ranks * c.chunk, sh.max_padded());
      }
      EXPECT_EQ(sh.total(), offset);
      total += sh.total();
    }
    EXPECT_EQ(total, table.total()) << ranks << " ranks";
    for (size_t s = 0; s < table.stages().size(); ++s)  // ascending owners within a stage
      for (int64_t i = 1; i < table.stages()[s].numel; ++i)
        EXPECT_LE(owner[size_t(table.stages()[s].offset + i - 1)], owner[size_t(table.stages()[s].offset + i)]);
  }
}

// gather_stages puts every rank's bf16 shard back in its place; reduce_stages leaves on each rank its chunk of
// sum_j weight_j * (rank j's gradients), against the same sums in float64 (summed in rank order in fp32, so within a
// few roundings) on random values, 3 ranks of uneven weight.
TEST(Shards, GatherAndWeightedReduceScatterMatchPlainSums) {
  const ParamTable table(test::small_config());
  const int N = 3;
  const int64_t P = table.total();
  const std::vector<float> weight{0.5f, 0.25f, 0.25f};
  std::vector<std::vector<float>> grads(N, std::vector<float>(size_t(P)));
  std::vector<uint16_t> full(static_cast<size_t>(P));
  Rng rng(7);
  for (auto& g : grads)
    for (float& x : g) x = float(rng.normal());
  for (uint16_t& w : full) w = uint16_t(rng.next_u64());
  std::vector<std::vector<uint16_t>> gathered(N);
  std::vector<std::vector<float>> reduced(N);
  ThreadRanks ranks(N);
  ranks.run([&](Communicator& comm) {
    const int r = comm.rank();
    const Shards sh(table, r, N);
    std::vector<uint16_t> mine(size_t(sh.total()));
    for (size_t s = 0; s < table.stages().size(); ++s)
      std::memcpy(mine.data() + sh.stage(s).offset, full.data() + table.stages()[s].offset + sh.stage(s).begin,
                  size_t(sh.stage(s).count) * 2);
    gathered[size_t(r)].resize(size_t(P));
    gather_stages(comm, table, sh, mine.data(), gathered[size_t(r)].data());
    reduced[size_t(r)].resize(size_t(sh.total()));
    reduce_stages(comm, table, sh, grads[size_t(r)].data(), reduced[size_t(r)].data(), weight);
  });
  for (int r = 0; r < N; ++r) {
    EXPECT_EQ(gathered[size_t(r)], full) << "rank " << r;
    const Shards sh(table, r, N);
    for (size_t s = 0; s < table.stages().size(); ++s)
      for (int64_t i = 0; i < sh.stage(s).count; ++i) {
        const size_t at = size_t(table.stages()[s].offset + sh.stage(s).begin + i);
        double want = 0;
        for (int j = 0; j < N; ++j) want += double(weight[size_t(j)]) * grads[size_t(j)][at];
        ASSERT_NEAR(reduced[size_t(r)][size_t(sh.stage(s).offset + i)], want, 1e-6 * (1 + std::fabs(want)))
            << "rank " << r << " stage " << s << " element " << i;
      }
  }
}

}  // namespace
}  // namespace ms
