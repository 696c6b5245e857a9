// The CUDA backend's streams, events and copies (skipped without a GPU).
#include <atomic>
#include <chrono>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "core/aligned.h"
#include "cuda_util.h"

namespace ms::test {
namespace {

TEST(CudaBackend, CopiesRoundTripThroughPinnedPools) {
  MS_REQUIRE_GPU();
  CudaBackend be;
  const int64_t n = 1000003;
  AlignedBuffer<uint16_t> weights(static_cast<size_t>(n));
  AlignedBuffer<float> back(static_cast<size_t>(n) / 2);
  be.pin_host(weights.data(), weights.size() * 2);
  be.pin_host(back.data(), back.size() * 4);
  const Bf16Input w = random_bf16(static_cast<size_t>(n), 41);
  std::copy(w.bits.begin(), w.bits.end(), weights.data());
  auto* dev = static_cast<uint16_t*>(be.alloc_device(static_cast<size_t>(n) * 2));
  const int up = be.create_stream("h2d", StreamKind::device), down = be.create_stream("d2h", StreamKind::device);
  be.upload_weights(up, dev, weights.data(), n, "weights");
  be.wait(down, be.record(up));
  be.copy_d2h(down, back.data(), dev, back.size() * 4, "back");
  be.sync(be.record(down));
  EXPECT_EQ(be.weight_bytes(), 2);
  EXPECT_EQ(std::memcmp(back.data(), weights.data(), back.size() * 4), 0);
  be.free_device(dev);
}

// A device stream that waits for a host stream (the optimizer) copies what the host task wrote, however
// late it runs; a host stream that waits for a device copy reads the copied bytes.
TEST(CudaBackend, EventsOrderHostAndDeviceStreams) {
  MS_REQUIRE_GPU();
  CudaBackend be;
  AlignedBuffer<float> pool(4096), result(4096);
  be.pin_host(pool.data(), pool.size() * 4);
  be.pin_host(result.data(), result.size() * 4);
  auto* dev = static_cast<float*>(be.alloc_device(pool.size() * 4));
  const int optimizer = be.create_stream("optimizer", StreamKind::host);
  const int up = be.create_stream("h2d", StreamKind::device), down = be.create_stream("d2h", StreamKind::device);
  for (int round = 0; round < 3; ++round) {
    be.launch(optimizer, "update", [&, round] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the copy must not run before this
      for (size_t i = 0; i < pool.size(); ++i) pool[i] = float(round * 10000 + int(i));
    });
    be.wait(up, be.record(optimizer));
    be.copy_h2d(up, dev, pool.data(), pool.size() * 4, "weights");
    be.wait(down, be.record(up));
    be.copy_d2h(down, result.data(), dev, result.size() * 4, "back");
    std::atomic<float> seen{-1};
    be.wait(optimizer, be.record(down));
    be.launch(optimizer, "read", [&] { seen = result[4095]; });
    be.sync(be.record(optimizer));
    EXPECT_EQ(seen.load(), float(round * 10000 + 4095));
    be.sync_all();  // retires the events; later waits on them are no-ops
  }
  be.free_device(dev);
}

TEST(CudaBackend, HostTaskErrorsReachTheHost) {
  MS_REQUIRE_GPU();
  CudaBackend be;
  const int s = be.create_stream("optimizer", StreamKind::host);
  be.launch(s, "fails", [] { throw Error("boom"); });
  EXPECT_THROW(be.sync_all(), Error);
}

}  // namespace
}  // namespace ms::test
