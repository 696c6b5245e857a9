// The inline-PTX wrappers (backend/cuda/ptx.cuh) one by one against plain loops, each lane's fragment checked where the
// PTX ISA's tables put it (written out here a third time, apart from the emulator's and the probe kernels'); then the
// mutations a tensor-core kernel can carry, which must fail: a wrong fragment map (on a GPU too), a missing cp.async
// wait and a missing barrier (on the emulator: its poisoned copies and shuffled schedule make them certain; a GPU's
// timing may hide them). The device check runs this suite first (tools/device-check.sh), since the emulator and the
// kernels could misread a table alike. Skipped without a GPU.
#include <cmath>
#include <vector>

#include "cuda_util.h"
#include "ptx_probe.h"

namespace ms::test {
namespace {

using ptx_probe::Mutation;

// d = a b + c in float64 over the bf16 values: a 16 x 16, b 16 x 8, c 16 x 8, all row-major.
std::vector<double> product(const Bf16Input& a, const Bf16Input& b, const std::vector<float>& c) {
  std::vector<double> d(16 * 8);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = c[size_t(i * 8 + j)];
      for (int k = 0; k < 16; ++k) s += a.values[size_t(i * 16 + k)] * b.values[size_t(k * 8 + j)];
      d[size_t(i * 8 + j)] = s;
    }
  return d;
}

// The largest error over the largest value: bf16 products are exact in fp32, so what is left is fp32 summing.
double error(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, m = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e = std::max(e, std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - want[i]));
    m = std::max(m, std::abs(want[i]));
  }
  return e / m;
}

struct MmaCase {
  Bf16Input a, b;
  std::vector<float> c;
  DeviceBuffer<uint16_t> da, db;
  DeviceBuffer<float> dc, dd;
  explicit MmaCase(uint64_t seed)
      : a(random_bf16(16 * 16, seed, 3.0)),
        b(random_bf16(16 * 8, seed + 1, 3.0)),
        c(random_floats(seed + 2)),
        da(a.bits),
        db(b.bits),
        dc(c),
        dd(16 * 8, NAN) {}
  static std::vector<float> random_floats(uint64_t seed) {
    std::vector<float> v;
    for (double x : randn(16 * 8, seed)) v.push_back(float(x));
    return v;
  }
};

TEST(CudaPtx, MmaMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  for (uint64_t seed : {11u, 12u, 13u}) {
    MmaCase k(seed);
    ptx_probe::mma(k.da.get(), k.db.get(), k.dc.get(), k.dd.get(), Mutation::none);
    EXPECT_LT(error(k.dd.read(), product(k.a, k.b, k.c)), 1e-5) << "seed " << seed;
  }
}

TEST(CudaPtx, WrongFragmentMapFails) {
  MS_REQUIRE_GPU();
  MmaCase k(21);
  ptx_probe::mma(k.da.get(), k.db.get(), k.dc.get(), k.dd.get(), Mutation::wrong_fragment);
  EXPECT_GT(error(k.dd.read(), product(k.a, k.b, k.c)), 0.05);
}

TEST(CudaPtx, LdmatrixGivesEachLaneItsFragment) {
  MS_REQUIRE_GPU();
  // Every element distinct and exact in bf16: matrix i, row r, column c holds 64 i + 8 r + c.
  std::vector<uint16_t> m;
  for (int i = 0; i < 256; ++i) m.push_back(f32_to_bf16(float(i)));
  DeviceBuffer<uint16_t> dm(m);
  for (int n : {1, 2, 4})
    for (bool trans : {false, true}) {
      DeviceBuffer<uint32_t> out(32 * 4, 0xdeadbeefu);
      ptx_probe::ldmatrix(dm.get(), n, trans, out.get());
      const std::vector<uint32_t> got = out.read();
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const uint32_t word = got[size_t(lane * 4 + i)];
          if (i >= n) {
            EXPECT_EQ(word, 0xdeadbeefu);
            continue;
          }
          for (int h = 0; h < 2; ++h) {
            // Lane l holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1; .trans the transpose's.
            const int row = lane / 4, col = 2 * (lane % 4) + h;
            const float want = float(64 * i + (trans ? 8 * col + row : 8 * row + col));
            EXPECT_EQ(bf16_to_f32(uint16_t(word >> (16 * h))), want)
                << "x" << n << (trans ? ".trans" : "") << " lane " << lane << " register " << i << " half " << h;
          }
        }
    }
}

// Column sums of a rows x 64 matrix, split by row parity as the probe's 128 threads take them.
std::vector<double> column_sums(const Bf16Input& m, int rows) {
  std::vector<double> s(128, 0.0);
  for (int t = 0; t < 128; ++t)
    for (int r = t / 64; r < rows; r += 2) s[size_t(t)] += m.values[size_t(r * 64 + t % 64)];
  return s;
}

TEST(CudaPtx, CpAsyncPipelineMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  for (int rows : {1, 16, 37, 80}) {  // one partial tile, one whole, a partial last, an even count
    const Bf16Input m = random_bf16(size_t(rows) * 64, 30 + uint64_t(rows));
    DeviceBuffer<uint16_t> dm(m.bits);
    DeviceBuffer<float> out(128, NAN);
    ptx_probe::cp_async_columns(dm.get(), rows, out.get(), Mutation::none);
    const std::vector<float> got = out.read();
    const std::vector<double> want = column_sums(m, rows);
    for (int t = 0; t < 128; ++t) EXPECT_NEAR(got[size_t(t)], want[size_t(t)], 1e-4) << rows << " rows, thread " << t;
  }
}

TEST(CudaPtx, TileGemmThroughCpAsyncAndLdmatrixMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  for (uint64_t seed : {41u, 42u}) {
    MmaCase k(seed);
    ptx_probe::tile_gemm(k.da.get(), k.db.get(), k.dc.get(), k.dd.get());
    EXPECT_LT(error(k.dd.read(), product(k.a, k.b, k.c)), 1e-5) << "seed " << seed;
  }
}

#ifdef MS_CUDA_EMULATED
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

// How many of the probe's 128 sums read a poisoned (NaN) value, over a few schedules.
int poisoned_sums(Mutation m) {
  const Bf16Input src = random_bf16(37 * 64, 50);
  DeviceBuffer<uint16_t> dm(src.bits);
  int nan = 0;
  for (int run = 0; run < 3; ++run) {
    DeviceBuffer<float> out(128, 0.f);
    ptx_probe::cp_async_columns(dm.get(), 37, out.get(), m);
    for (float v : out.read()) nan += std::isnan(v);
  }
  return nan;
}

TEST(CudaPtx, MissingCpAsyncWaitFails) {
  MS_REQUIRE_GPU();
  if (!kEmulated) GTEST_SKIP() << "a missing wait is certain to show only on the emulator (tools/cuda-emu)";
  EXPECT_GT(poisoned_sums(Mutation::no_wait), 0);
}

TEST(CudaPtx, MissingBarrierFails) {
  MS_REQUIRE_GPU();
  if (!kEmulated) GTEST_SKIP() << "a missing barrier is certain to show only on the emulator (tools/cuda-emu)";
  EXPECT_GT(poisoned_sums(Mutation::no_barrier), 0);
}

}  // namespace
}  // namespace ms::test
