#include <cmath>
#include <limits>

#include "backend/cpu/softmax_row.h"
#include "test_util.h"

namespace ms::test {

// On random rows of odd lengths (shorter than a vector, a vector and a tail), against std::exp in double and a plain
// max. float's tolerance covers Exp's 1 ulp and the rounding of a x + b (|a x + b| < 12 here: up to 12 x 2^-24).
template <class T>
void check_rows(double rel_tol) {
  for (int64_t n : {1, 3, 7, 17, 37, 131}) {
    auto x = randn(n, uint64_t(n), 3.0);
    std::vector<T> row(x.begin(), x.end());
    std::vector<double> ref(row.begin(), row.end());  // the float inputs, exponentiated in double
    T mx = T(-1e30);
    for (T v : row) mx = v > mx ? v : mx;
    EXPECT_EQ(cpu::row_max(row.data(), n, T(-1e30)), mx);
    EXPECT_EQ(cpu::row_max(row.data(), n, T(1e30)), T(1e30));
    const T a = T(0.7), b = T(-0.3);
    double sum = 0;
    for (auto& v : ref) sum += (v = std::exp(double(a) * v + double(b)));
    const T got = cpu::exp_affine(row.data(), n, a, b);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(row[size_t(i)], ref[size_t(i)], rel_tol * ref[size_t(i)]) << n;
    EXPECT_NEAR(double(got), sum, rel_tol * sum * 4) << n;
  }
}

TEST(SoftmaxRow, MatchesStdExpAndMax) {
  check_rows<float>(1e-6);
  check_rows<double>(1e-15);
}

TEST(SoftmaxRow, EdgeValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, 0.f, 200.f, nan, -200.f};
  cpu::exp_affine(x.data(), int64_t(x.size()), 1.f, 0.f);
  EXPECT_EQ(x[0], 0.f);
  EXPECT_EQ(x[1], 1.f);
  EXPECT_EQ(x[2], inf);
  EXPECT_TRUE(std::isnan(x[3]));
  EXPECT_EQ(x[4], 0.f);
}

// x = {finite, overflows, finite, overflows} around log(max): the finite ones within 4 ulp (rel) of std::exp.
template <class T>
void check_exp_threshold(std::vector<T> x, T rel) {
  const std::vector<T> arg = x;
  cpu::exp_affine(x.data(), int64_t(x.size()), T(1), T(0));
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 2) {
      EXPECT_EQ(x[i], std::numeric_limits<T>::infinity()) << arg[i];
    } else {
      EXPECT_NEAR(x[i], std::exp(arg[i]), rel * std::exp(arg[i])) << arg[i];
    }
  }
}

TEST(SoftmaxRow, ExpNearTheOverflowThreshold) {
  // Just below log(max) the result is finite and accurate, just above it +inf, in float and double (Highway's Exp is
  // documented up to 104 and 706 only; exp_vector's cut-off is log(max), 88.72 and 709.78).
  check_exp_threshold<float>({88.7f, 88.73f, 88.72f, 89.f}, 4e-7f);
  check_exp_threshold<double>({709.7, 709.79, 707.5, 800.0}, 1e-15);
}

}  // namespace ms::test
