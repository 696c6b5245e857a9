#include "ops/activation.h"

#include <cmath>

#include "core/parallel.h"

namespace ms::cpu {

namespace {
constexpr int64_t kMinParallel = 1 << 14;  // elements below which threads cost more than they save
constexpr double kGeluK = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;
}  // namespace

template <class T>
void gelu_tanh_forward(const T* x, T* y, int64_t n) {
  parallel_for(n, [&](int64_t i) {
    const T v = x[i];
    y[i] = T(0.5) * v * (T(1) + std::tanh(T(kGeluK) * (v + T(kGeluA) * v * v * v)));
  }, kMinParallel);
}

template <class T>
void gelu_tanh_backward(const T* x, const T* dy, T* dx, int64_t n) {
  // gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2), t = tanh(k (x + a x^3)).
  parallel_for(n, [&](int64_t i) {
    const T v = x[i];
    const T t = std::tanh(T(kGeluK) * (v + T(kGeluA) * v * v * v));
    const T d = T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * T(kGeluK) * (T(1) + T(3 * kGeluA) * v * v);
    dx[i] += dy[i] * d;
  }, kMinParallel);
}

template <class T>
void silu_forward(const T* x, T* y, int64_t n) {
  parallel_for(n, [&](int64_t i) { y[i] = x[i] / (T(1) + std::exp(-x[i])); }, kMinParallel);
}

template <class T>
void silu_backward(const T* x, const T* dy, T* dx, int64_t n) {
  // silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
  parallel_for(n, [&](int64_t i) {
    const T s = T(1) / (T(1) + std::exp(-x[i]));
    dx[i] += dy[i] * s * (T(1) + x[i] * (T(1) - s));
  }, kMinParallel);
}

template void gelu_tanh_forward<float>(const float*, float*, int64_t);
template void gelu_tanh_forward<double>(const double*, double*, int64_t);
template void gelu_tanh_backward<float>(const float*, const float*, float*, int64_t);
template void gelu_tanh_backward<double>(const double*, const double*, double*, int64_t);
template void silu_forward<float>(const float*, float*, int64_t);
template void silu_forward<double>(const double*, double*, int64_t);
template void silu_backward<float>(const float*, const float*, float*, int64_t);
template void silu_backward<double>(const double*, const double*, double*, int64_t);

}  // namespace ms::cpu
