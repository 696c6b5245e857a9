#include "ops/mse_loss.h"
#include "test_util.h"

namespace ms::test {

TEST(MseLoss, GradientMatchesFiniteDifferences) {
  const int64_t n = 37;
  auto pred = randn(n, 1), target = randn(n, 2);
  auto loss = [&] { return cpu::mse_loss<double>({.pred = pred.data(), .target = target.data(), .n = n}); };
  std::vector<double> dpred(n, 7.0);  // [n]; overwritten
  cpu::mse_loss<double>({.pred = pred.data(), .target = target.data(), .dpred = dpred.data(), .n = n});
  EXPECT_LT(fd_error(pred, dpred, loss), kFdTol);
}

TEST(MseLoss, KnownValues) {
  const std::vector<double> pred = {1.0, 2.0, 3.0}, target = {0.0, 2.0, 5.0};
  std::vector<double> dpred(3);  // [3]
  EXPECT_DOUBLE_EQ(cpu::mse_loss<double>(
                       {.pred = pred.data(), .target = target.data(), .dpred = dpred.data(), .n = 3, .scale = 0.25}),
                   5.0 / 3.0);  // (1 + 0 + 4) / 3
  // 2 (pred - target) / 3 * 0.25.
  EXPECT_DOUBLE_EQ(dpred[0], 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(dpred[1], 0.0);
  EXPECT_DOUBLE_EQ(dpred[2], -1.0 / 3.0);
}

// period / skip (TI2V's image-to-video steps): the first `skip` of each run of `period` left out of the mean and of
// the gradient, against the plain mean over the kept values; and the kept values' gradient by finite differences.
TEST(MseLoss, SkippedRunsAreLeftOut) {
  const int64_t period = 35, skip = 7, n = 3 * period;  // three clip channels of 5 frames, one 7-value frame each
  const auto pred = randn(n, 5), target = randn(n, 6);
  double want = 0;
  for (int64_t i = 0; i < n; ++i)
    if (i % period >= skip) want += (pred[size_t(i)] - target[size_t(i)]) * (pred[size_t(i)] - target[size_t(i)]);
  want /= double(n - 3 * skip);
  std::vector<double> dpred(n, 7.0);
  const MseLossParams<double> p{
      .pred = pred.data(), .target = target.data(), .dpred = dpred.data(), .n = n, .period = period, .skip = skip};
  EXPECT_NEAR(cpu::mse_loss<double>(p), want, 1e-14 * want);
  for (int64_t i = 0; i < n; ++i) {
    if (i % period < skip) {
      EXPECT_EQ(dpred[size_t(i)], 0.0) << i;
    }
  }
  auto pr = pred;
  auto loss = [&] {
    return cpu::mse_loss<double>({.pred = pr.data(), .target = target.data(), .n = n, .period = period, .skip = skip});
  };
  cpu::mse_loss<double>(
      {.pred = pr.data(), .target = target.data(), .dpred = dpred.data(), .n = n, .period = period, .skip = skip});
  EXPECT_LT(fd_error(pr, dpred, loss), kFdTol);
}

TEST(MseLoss, FloatMatchesDouble) {
  const int64_t n = 100003;  // several partial-sum chunks
  auto pred = randn(n, 3), target = randn(n, 4);
  std::vector<double> dpred(n);
  const double l = cpu::mse_loss<double>(
      {.pred = pred.data(), .target = target.data(), .dpred = dpred.data(), .n = n, .scale = 0.5});
  auto predf = to_f32(pred), targetf = to_f32(target);
  std::vector<float> dpredf(n);
  const double lf = cpu::mse_loss<float>(
      {.pred = predf.data(), .target = targetf.data(), .dpred = dpredf.data(), .n = n, .scale = 0.5});
  EXPECT_NEAR(lf, l, kF32Tol * l);
  EXPECT_LT(rel_l2(dpredf, dpred), kF32Tol);
}

}  // namespace ms::test
