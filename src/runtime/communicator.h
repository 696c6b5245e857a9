// The ranks of a distributed run (docs/distributed.md) and the collectives the schedule needs between them. One
// process is one rank; a run without a launcher is the single rank of SingleProcess, and never calls a collective.
// Each Channel is an independent in-order sequence of collectives (one per stream that issues them), so the order in
// which collectives of different channels interleave may differ between ranks; within a channel every rank issues
// the same collectives in the same order. Errors (a peer that does not answer within the timeout, an MPI error)
// throw ms::Error naming the ranks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ms {

enum class Channel { control, weights, grads };
inline constexpr int kChannels = 3;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // among the ranks on this machine
  virtual int local_size() const = 0;

  // buf holds size() parts of `bytes`, this rank's at rank() * bytes: fills in every other rank's part.
  virtual void allgather(Channel c, void* buf, size_t bytes) = 0;
  // send and recv hold size() parts of `bytes`: part j of send goes to rank j, part j of recv comes from rank j.
  virtual void alltoall(Channel c, const void* send, void* recv, size_t bytes) = 0;
  // Ends every rank of the run at once (a rank that cannot go on would leave the others waiting).
  [[noreturn]] virtual void abort(int code) noexcept = 0;

  // buf [size() x chunk] on every rank: this rank's part becomes sum_j weight[j] * (rank j's part), summed in rank
  // order, so that the result is the same bits on every run. weight has size() entries.
  void reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight);
  // Every rank's `mine` (the same length on every rank), rank by rank: [size() x mine.size()].
  std::vector<double> gather(Channel c, std::span<const double> mine);
  // The sum over ranks, in rank order.
  double sum(Channel c, double x);
  // Rank 0's x, on every rank.
  double from_lead(Channel c, double x);
  void barrier(Channel c);

  // What this rank's collectives on a channel have moved and waited, for benchmarks (`bench stream` under mpirun).
  struct Traffic {
    int64_t calls = 0, bytes = 0;  // bytes sent to the other ranks
    double seconds = 0;            // in the collectives, waiting for the others included
  };
  const Traffic& traffic(Channel c) const { return traffic_[int(c)]; }

 protected:
  void count(Channel c, int64_t bytes, double seconds) {
    Traffic& t = traffic_[int(c)];
    ++t.calls, t.bytes += bytes, t.seconds += seconds;
  }

 private:
  std::vector<float> scratch_[kChannels];  // reduce_scatter's received parts, per channel
  Traffic traffic_[kChannels];             // each written by its channel's thread only
};

// The run without a launcher: rank 0 of 1.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void allgather(Channel, void*, size_t) override {}
  void alltoall(Channel c, const void* send, void* recv, size_t bytes) override;
  [[noreturn]] void abort(int code) noexcept override;
};

}  // namespace ms
