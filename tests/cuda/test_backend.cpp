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
  const int64_t n = 1000003;
  AlignedBuffer<uint16_t> weights(static_cast<size_t>(n));  // before the backend: unpinned after it goes
  AlignedBuffer<float> back(static_cast<size_t>(n) / 2);
  CudaBackend be;
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
  AlignedBuffer<float> pool(4096), result(4096);
  CudaBackend be;
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

// A failing optimizer task must not leave a device stream waiting on it forever: its signal still comes,
// the device work after it runs, and the error reaches the host.
TEST(CudaBackend, HostTaskErrorsReachTheHostAndReleaseWaitingStreams) {
  MS_REQUIRE_GPU();
  AlignedBuffer<float> pool(1024);
  CudaBackend be;
  be.pin_host(pool.data(), pool.size() * 4);
  auto* dev = static_cast<float*>(be.alloc_device(pool.size() * 4));
  const int s = be.create_stream("optimizer", StreamKind::host), up = be.create_stream("h2d", StreamKind::device);
  be.launch(s, "fails", [] { throw Error("boom"); });
  be.wait(up, be.record(s));
  be.copy_h2d(up, dev, pool.data(), pool.size() * 4, "weights");
  be.sync(be.record(up));  // returns: the signal ran although the task before it failed
  EXPECT_THROW(be.sync_all(), Error);
  be.free_device(dev);
}

// The arena is zeroed before any stream can write it: a copy enqueued at once lands and stays.
TEST(CudaBackend, ArenaIsZeroedBeforeStreamsUseIt) {
  MS_REQUIRE_GPU();
  const size_t bytes = size_t(1) << 30;
  AlignedBuffer<float> pattern(1024), back(1024), head(1024);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = float(i) + 0.5f;
  CudaBackend be;
  for (auto* b : {&pattern, &back, &head}) be.pin_host(b->data(), b->size() * 4);
  char* arena = static_cast<char*>(be.alloc_device(bytes));
  const int s = be.create_stream("h2d", StreamKind::device);
  float* tail = reinterpret_cast<float*>(arena + bytes) - pattern.size();
  be.copy_h2d(s, tail, pattern.data(), pattern.size() * 4, "pattern");
  be.copy_d2h(s, back.data(), tail, back.size() * 4, "back");
  be.copy_d2h(s, head.data(), arena, head.size() * 4, "head");
  be.sync(be.record(s));
  EXPECT_EQ(std::memcmp(back.data(), pattern.data(), pattern.size() * 4), 0);
  for (size_t i = 0; i < head.size(); ++i) ASSERT_EQ(head[i], 0.f) << i;
  be.free_device(arena);
}

// Copies from memory that is not pinned would run synchronously: refused with a message.
TEST(CudaBackend, CopiesFromUnpinnedMemoryAreRefused) {
  MS_REQUIRE_GPU();
  std::vector<float> pageable(256, 1.f);
  CudaBackend be;
  auto* dev = static_cast<float*>(be.alloc_device(pageable.size() * 4));
  const int s = be.create_stream("h2d", StreamKind::device);
  const std::string e = error_of([&] { be.copy_h2d(s, dev, pageable.data(), pageable.size() * 4, "x"); });
  EXPECT_NE(e.find("not pinned"), std::string::npos) << e;
  be.free_device(dev);
}

}  // namespace
}  // namespace ms::test
