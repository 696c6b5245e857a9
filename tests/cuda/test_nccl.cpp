// The device collectives of a distributed run on the CUDA backend (backend/cuda/nccl.h): NcclCollectives over the
// threads-as-ranks stand-in of NCCL (fake_nccl.h) against plain sums, its watchdog, and the real library with a
// one-rank communicator (a GPU only: the emulator cannot run NCCL). StreamedModel over them: test_streamed.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/nccl.h"
#include "cuda_util.h"
#include "fake_nccl.h"
#include "thread_ranks.h"

namespace ms::test {
namespace {

// Every rank's part of an all-gather lands in every rank's buffer, and each rank's chunk of a reduce-scatter is the
// weighted sum of the ranks' chunks (float64 reference), in place, for 3 ranks with odd sizes and uneven weights; the
// pre-multiplied ops are destroyed after use.
TEST(CudaNccl, ThreeRanksGatherAndReduceScatterInPlace) {
  MS_REQUIRE_GPU();
  FakeNccl::reset();
  const cuda::NcclApi api = FakeNccl::api();
  constexpr int N = 3;
  const size_t bytes = 1001;  // an all-gather part: odd, as a stage's chunk of bf16 bytes can be
  const int64_t chunk = 777;  // a reduce-scatter part, in floats
  const std::vector<float> weight{0.5f, 0.375f, 0.125f};
  std::vector<std::vector<uint8_t>> parts(N);
  std::vector<std::vector<float>> grads(N);
  for (int r = 0; r < N; ++r) {
    for (double v : randn(bytes, 10 + uint64_t(r))) parts[size_t(r)].push_back(uint8_t(int(v * 1000) & 255));
    grads[size_t(r)] = to_f32(randn(size_t(N * chunk), 20 + uint64_t(r)));
  }
  std::vector<std::vector<uint8_t>> gathered(N);
  std::vector<std::vector<float>> reduced(N);
  ThreadRanks ranks(N);
  ranks.run([&](Communicator& comm) {
    const int r = comm.rank();
    cuda::Stream stream = nullptr;
    MS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cuda::set_current_stream(stream);
    {
      cuda::NcclCollectives nccl(api, comm, 60);
      std::vector<uint8_t> buf(N * bytes, 0xA5);  // poison where the others' parts go
      std::copy(parts[size_t(r)].begin(), parts[size_t(r)].end(), buf.begin() + r * ptrdiff_t(bytes));
      DeviceBuffer<uint8_t> dbuf(buf);
      DeviceBuffer<float> dgrads(grads[size_t(r)]);
      nccl.allgather(Channel::weights, dbuf.get(), bytes);
      nccl.reduce_scatter(Channel::grads, dgrads.get(), chunk, weight);
      MS_CUDA_CHECK(cudaStreamSynchronize(stream));
      gathered[size_t(r)] = dbuf.read();
      reduced[size_t(r)] = dgrads.read();
    }
    cuda::set_current_stream(nullptr);
    MS_CUDA_CHECK(cudaStreamDestroy(stream));
  });
  EXPECT_EQ(FakeNccl::collectives, 4 * N);  // the two connecting collectives, then the test's two, on every rank
  EXPECT_EQ(FakeNccl::destroyed, 2 * N);    // both channels' communicators, on every rank
  EXPECT_EQ(FakeNccl::aborted, 0);
  EXPECT_EQ(FakeNccl::misuses, 0);
  for (cuda::NcclComm* c : FakeNccl::comms) EXPECT_TRUE(c->ops.empty()) << "a pre-multiplied sum left undestroyed";
  for (int r = 0; r < N; ++r) {
    for (int j = 0; j < N; ++j)
      EXPECT_TRUE(std::equal(parts[size_t(j)].begin(), parts[size_t(j)].end(),
                             gathered[size_t(r)].begin() + j * ptrdiff_t(bytes)))
          << "rank " << r << " part " << j;
    std::vector<double> want(static_cast<size_t>(chunk)), got(static_cast<size_t>(chunk));
    for (int64_t i = 0; i < chunk; ++i) {
      for (int j = 0; j < N; ++j)
        want[size_t(i)] += double(weight[size_t(j)]) * grads[size_t(j)][size_t(r * chunk + i)];
      got[size_t(i)] = reduced[size_t(r)][size_t(r * chunk + i)];
    }
    expect_close("reduce_scatter_rank" + std::to_string(r), got, want, 1e-6);
  }
  FakeNccl::reset();
}

// NCCL's asynchronous error ends the run within the watchdog's period: an error naming the rank and the channel, the
// communicators aborted, then Communicator::abort (ThreadRanks: std::abort).
TEST(CudaNccl, AnAsyncErrorEndsTheRunNamingTheChannel) {
  MS_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        FakeNccl::reset();
        const cuda::NcclApi api = FakeNccl::api();
        ThreadRanks ranks(1);
        ranks.run([&](Communicator& comm) {
          cuda::NcclCollectives nccl(api, comm, 60);
          FakeNccl::comms.back()->async_error = 6;  // the grads channel's communicator: ncclRemoteError
          std::this_thread::sleep_for(std::chrono::seconds(5));
        });
      },
      "rank 0 of 1: NCCL reports a failure in a gradient reduce-scatter: fake NCCL error \\(6\\)");
}

// abort() hands both communicators to ncclCommAbort once; the watchdog then leaves them alone (no call on a gone
// communicator while it keeps watching), and the destructor destroys nothing more.
TEST(CudaNccl, AbortLetsTheCommunicatorsGoOnce) {
  MS_REQUIRE_GPU();
  FakeNccl::reset();
  const cuda::NcclApi api = FakeNccl::api();
  ThreadRanks(1).run([&](Communicator& comm) {
    cuda::NcclCollectives nccl(api, comm, 60);
    nccl.abort();
    nccl.abort();
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // a few of the watchdog's rounds
  });
  EXPECT_EQ(FakeNccl::aborted, 2);
  EXPECT_EQ(FakeNccl::destroyed, 0);
  EXPECT_EQ(FakeNccl::misuses, 0);
  FakeNccl::reset();
}

// A collective that does not complete within the timeout (its stream stalls, as when a peer hangs) ends the run,
// naming the channel and the timeout.
TEST(CudaNccl, ACollectivePastTheTimeoutEndsTheRun) {
  MS_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        FakeNccl::reset();
        FakeNccl::hang = true;
        const cuda::NcclApi api = FakeNccl::api();
        ThreadRanks ranks(1);
        ranks.run([&](Communicator& comm) {
          cuda::Stream stream = nullptr;
          MS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
          cuda::set_current_stream(stream);
          cuda::NcclCollectives nccl(api, comm, 0.5);
          DeviceBuffer<uint8_t> buf(64, 1);
          nccl.allgather(Channel::weights, buf.get(), 64);
          std::this_thread::sleep_for(std::chrono::seconds(10));
        });
      },
      "rank 0 of 1: a weight all-gather on the GPUs \\(NCCL\\) did not complete within 0.5 s");
}

// The real library, one rank: the all-gather leaves the buffer as it is, and the reduce-scatter multiplies it by the
// rank's weight (NCCL's pre-multiplied sum), on a stream, within fp32 rounding.
TEST(CudaNccl, OneRankOnTheRealLibrary) {
  MS_REQUIRE_GPU();
#ifdef MS_CUDA_EMULATED
  GTEST_SKIP() << "the emulator cannot run NCCL (a GPU library): tools/device-check.sh runs this on a GPU";
#else
  const cuda::NcclApi* api = nullptr;
  try {
    api = &cuda::load_nccl();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  SingleProcess comm;
  cuda::Stream stream = nullptr;
  MS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cuda::set_current_stream(stream);
  const std::vector<float> x = to_f32(randn(4099, 31));
  std::vector<uint8_t> bytes(333);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 37 + 11);
  {
    cuda::NcclCollectives nccl(*api, comm, 60);
    DeviceBuffer<float> dx(x);
    DeviceBuffer<uint8_t> db(bytes);
    const std::vector<float> w{0.3125f};
    nccl.allgather(Channel::weights, db.get(), bytes.size());
    nccl.reduce_scatter(Channel::grads, dx.get(), int64_t(x.size()), w);
    MS_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(db.read(), bytes);
    std::vector<double> want;
    for (float v : x) want.push_back(0.3125 * v);
    expect_close("nccl_one_rank_pre_mul_sum", dx.read(), want, 1e-6);
  }
  cuda::set_current_stream(nullptr);
  MS_CUDA_CHECK(cudaStreamDestroy(stream));
#endif
}

}  // namespace
}  // namespace ms::test
