// The collectives of a distributed run between the ranks' devices (docs/distributed.md). Where a backend has them
// (the CUDA backend: NCCL, backend/cuda/nccl.h), StreamedModel gathers each stage's weights and reduce-scatters its
// gradients in device memory on its H2D and D2H streams, instead of through host memory on the Communicator. Both
// calls are made inside Backend::launch on a device stream: they enqueue there and return. Within a channel every
// rank makes the same calls in the same order, as with Communicator.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/communicator.h"

namespace ms {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // buf [ranks x bytes] in device memory, this rank's part at rank * bytes: fills in every other rank's part.
  virtual void allgather(Channel c, void* buf, size_t bytes) = 0;
  // buf [ranks x chunk] fp32 in device memory: this rank's part becomes sum_j weight[j] * (rank j's part); weight
  // has one entry per rank.
  virtual void reduce_scatter(Channel c, float* buf, int64_t chunk, std::span<const float> weight) = 0;
  // Ends the collectives in flight, so that a rank leaving on an error can drain its streams instead of waiting for
  // peers that will not come; no collective can be made after it.
  virtual void abort() noexcept = 0;
};

}  // namespace ms
