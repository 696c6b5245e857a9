#include "backend/cuda/activation.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// y[i] = f(x[i]) or, with dy, dx[i] += dy[i] * f'(x[i]); f is the functor's forward / derivative.
template <class T, class F>
__global__ void pointwise_forward(const T* x, T* y, int64_t n, F f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, f.value(load(x, i)));
}

template <class T, class F>
__global__ void pointwise_backward(const T* x, const T* dy, T* dx, int64_t n, F f) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(dx, i, load(dx, i) + load(dy, i) * f.derivative(load(x, i)));
}

struct GeluTanh {
  __device__ float value(float v) const { return 0.5f * v * (1.f + tanhf(kGeluK * (v + kGeluA * v * v * v))); }
  __device__ float derivative(float v) const {
    const float t = tanhf(kGeluK * (v + kGeluA * v * v * v));
    return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluA * v * v);
  }
};

struct Silu {
  __device__ float value(float v) const { return v / (1.f + __expf(-v)); }
  __device__ float derivative(float v) const {
    const float s = 1.f / (1.f + __expf(-v));
    return s * (1.f + v * (1.f - s));
  }
};

// y[i] = gelu_tanh(gate[i]) * up[i]: the T5 FFN's gated activation.
__global__ void gelu_tanh_gate_kernel(const uint16_t* gate, const uint16_t* up, uint16_t* y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(y, i, GeluTanh{}.value(load(gate, i)) * load(up, i));
}

template <class F, class T>
void forward(const T* x, T* y, int64_t n, Stream stream) {
  pointwise_forward<<<elementwise_blocks(n), 256, 0, stream>>>(x, y, n, F{});
  MS_CUDA_CHECK_LAUNCH();
}

template <class F, class T>
void backward(const T* x, const T* dy, T* dx, int64_t n, Stream stream) {
  pointwise_backward<<<elementwise_blocks(n), 256, 0, stream>>>(x, dy, dx, n, F{});
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu_tanh_forward(const ActivationParams<uint16_t>& p, Stream stream) { forward<GeluTanh>(p.x, p.y, p.n, stream); }
void gelu_tanh_backward(const ActivationParams<uint16_t>& p, Stream stream) {
  backward<GeluTanh>(p.x, p.dy, p.dx, p.n, stream);
}
void gelu_tanh_gate_forward(const uint16_t* gate, const uint16_t* up, uint16_t* y, int64_t n, Stream stream) {
  gelu_tanh_gate_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(gate, up, y, n);
  MS_CUDA_CHECK_LAUNCH();
}
void silu_forward(const ActivationParams<uint16_t>& p, Stream stream) { forward<Silu>(p.x, p.y, p.n, stream); }
void silu_backward(const ActivationParams<uint16_t>& p, Stream stream) { backward<Silu>(p.x, p.dy, p.dx, p.n, stream); }
void silu_forward(const ActivationParams<float>& p, Stream stream) { forward<Silu>(p.x, p.y, p.n, stream); }
void silu_backward(const ActivationParams<float>& p, Stream stream) { backward<Silu>(p.x, p.dy, p.dx, p.n, stream); }

}  // namespace ms::cuda
