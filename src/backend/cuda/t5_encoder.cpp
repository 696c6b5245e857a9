#include "backend/cuda/t5_encoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/rmsnorm.h"
#include "backend/cuda/t5_attention.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/text.h"
#include "core/units.h"
#include "model/workspace.h"

namespace ms::cuda {
namespace {

// The residual stream (fp32) normed into bf16 for the next GEMM, or into the fp32 output.
using NormToBf16 = RmsNormParams<float, float, uint16_t, uint16_t>;
using NormToF32 = RmsNormParams<float, float, uint16_t, float>;

constexpr int64_t kAlign = 256;             // bytes: every tensor and buffer starts on a cuBLASLt-friendly boundary
constexpr int64_t kUploadFloats = 1 << 23;  // a tensor is widened and narrowed on the host 32 MiB of f32 at a time

bool is_table(const std::string& name) { return name.ends_with("pos_embedding.embedding.weight"); }

// The working set of one prompt of up to T = text_len tokens, laid out in one allocation by model/workspace.h.
struct Buffers {
  float* x;                 // [T, dim] the residual stream
  float* out;               // [T, dim] the final norm's output
  float* rstd;              // [T] the norms' statistics (not kept)
  uint16_t* h;              // [T, dim] a sublayer's normed input
  uint16_t *q, *k, *v, *y;  // [T, dim_attn] each; y the heads' outputs
  float* s;                 // [H, T, T] the heads' scores
  uint16_t* p;              // [H, T, T] their probabilities
  uint16_t *g, *f;          // [T, dim_ffn] each: the gate, then gelu(gate) * fc1
  int32_t* bucket;          // [2T - 1] the bucket of each offset
};

// visit(b, f) calls f(numel, field) for every buffer (workspace_bytes, bind_workspace).
auto buffers(const T5Config& c) {
  return [&c](Buffers& b, auto&& f) {
    const int64_t T = c.text_len, d = c.dim, da = c.dim_attn, df = c.dim_ffn, H = c.num_heads;
    f(T * d, b.x), f(T * d, b.out), f(T, b.rstd), f(T * d, b.h);
    f(T * da, b.q), f(T * da, b.k), f(T * da, b.v), f(T * da, b.y);
    f(H * T * T, b.s), f(H * T * T, b.p), f(T * df, b.g), f(T * df, b.f), f(2 * T - 1, b.bucket);
  };
}

}  // namespace

int64_t T5Encoder::weight_bytes(const T5Config& c) {
  int64_t bytes = 0;
  for (const auto& [name, shape] : t5_param_shapes(c))
    if (name != "token_embedding.weight") bytes += round_up(numel(shape) * (is_table(name) ? 4 : 2), kAlign);
  return bytes;
}

int64_t T5Encoder::workspace_bytes(const T5Config& c) { return ms::workspace_bytes<Buffers>(buffers(c), kAlign); }

std::string T5Encoder::refuses(const T5Config& c) {
  const int64_t wb = weight_bytes(c), ws = workspace_bytes(c);
  size_t free = 0, total = 0;
  MS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (wb + ws <= int64_t(free)) return "";
  return cat("the text encoder on the GPU needs ", format_bytes(double(wb + ws)), " of its memory (",
             format_bytes(double(wb)), " of bf16 weights, ", format_bytes(double(ws)), " for a ", c.text_len,
             "-token prompt) and the GPU has ", format_bytes(double(free)), " free");
}

void T5Encoder::CudaFree::operator()(char* p) const { cudaFree(p); }

T5Encoder::T5Encoder(const T5Weights& w) : config_(w.config()) {
  if (const std::string why = refuses(config_); !why.empty()) MS_FAIL(why, "; encode on the CPU with --backend cpu");
  const auto device_bytes = [](int64_t n) {
    char* p = nullptr;
    MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), size_t(n)));
    return DeviceBytes(p);
  };
  weights_ = device_bytes(weight_bytes(config_));
  workspace_ = device_bytes(workspace_bytes(config_));
  // The f32 rows of each tensor, narrowed to bf16 on the host where it is not a position table, then copied up.
  std::vector<float> wide;
  std::vector<uint16_t> narrow;
  int64_t at = 0;
  for (const auto& [name, shape] : t5_param_shapes(config_)) {
    if (name == "token_embedding.weight") continue;
    offset_[name] = at;
    const int64_t rows = shape[0], cols = numel(shape) / rows, step = std::max<int64_t>(1, kUploadFloats / cols);
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
      const int64_t n = std::min(step, rows - r0), count = n * cols;
      wide.resize(size_t(count));
      w.read_rows(name, r0, n, wide.data());
      if (is_table(name)) {
        MS_CUDA_CHECK(
            cudaMemcpy(weights_.get() + at + r0 * cols * 4, wide.data(), size_t(count * 4), cudaMemcpyHostToDevice));
        continue;
      }
      narrow.resize(size_t(count));
      convert_from_f32(DType::bf16, wide.data(), narrow.data(), count);
      MS_CUDA_CHECK(
          cudaMemcpy(weights_.get() + at + r0 * cols * 2, narrow.data(), size_t(count * 2), cudaMemcpyHostToDevice));
    }
    at += round_up(numel(shape) * (is_table(name) ? 4 : 2), kAlign);
  }
}

const uint16_t* T5Encoder::weight(const std::string& name) const {
  return reinterpret_cast<const uint16_t*>(weights_.get() + offset_.at(name));
}

const float* T5Encoder::table(int64_t layer) const {
  const std::string name =
      config_.shared_pos ? "pos_embedding.embedding.weight" : cat("blocks.", layer, ".pos_embedding.embedding.weight");
  return reinterpret_cast<const float*>(weights_.get() + offset_.at(name));
}

std::vector<float> T5Encoder::encode(const T5Weights& w, const std::vector<int64_t>& ids) {
  const T5Config& c = config_;
  const int64_t L = int64_t(ids.size()), d = c.dim, da = c.dim_attn, df = c.dim_ffn, H = c.num_heads, hd = c.head_dim();
  MS_CHECK(L <= c.text_len, "the text encoder on the GPU takes at most text_len = ", c.text_len, " tokens, not ", L);
  MS_CHECK(w.config().vocab == c.vocab && w.config().dim == c.dim, "T5Encoder::encode: weights of another encoder");
  const std::vector<float> x0 = t5_embed(w, ids);  // [L, dim]
  const std::vector<int64_t> b64 = t5_offset_buckets(L, c.num_buckets);
  const std::vector<int32_t> bucket(b64.begin(), b64.end());  // [2L - 1]
  const Buffers b = bind_workspace<Buffers>(workspace_.get(), buffers(c), kAlign);
  const Stream st = nullptr;
  MS_CUDA_CHECK(cudaMemcpyAsync(b.x, x0.data(), x0.size() * 4, cudaMemcpyHostToDevice, st));
  MS_CUDA_CHECK(cudaMemcpyAsync(b.bucket, bucket.data(), bucket.size() * 4, cudaMemcpyHostToDevice, st));
  // y [L, out] (bf16) = in [L, n_in] W^T, or x [L, out] (fp32) += in W^T for the sublayers' outputs.
  const auto project = [&](const uint16_t* in, int64_t n_in, const std::string& name, int64_t out, uint16_t* y) {
    gemm_.gemm<uint16_t>(false, true, L, out, n_in, 1.0f, in, n_in, weight(name), n_in, 0.0f, y, out, st);
  };
  const auto add_projection = [&](const uint16_t* in, int64_t n_in, const std::string& name) {
    gemm_.gemm<float>(false, true, L, d, n_in, 1.0f, in, n_in, weight(name), n_in, 1.0f, b.x, d, st);
  };
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = cat("blocks.", layer, ".");
    // x += Attn(RMSNorm(x)): per head s = q k^T (no 1/sqrt(head_dim)), p = softmax(s + bias), y = p v
    rmsnorm_forward(
        NormToBf16{
            .x = b.x, .w = weight(p + "norm1.weight"), .y = b.h, .rstd = b.rstd, .N = L, .C = d, .eps = kT5NormEps},
        st);
    project(b.h, d, p + "attn.q.weight", da, b.q);
    project(b.h, d, p + "attn.k.weight", da, b.k);
    project(b.h, d, p + "attn.v.weight", da, b.v);
    // every head in one launch: head h's q, k, v and y are columns h * hd.. of [L, da], its s and p [L, L] each
    gemm_.gemm<float>(false, true, L, L, hd, 1.0f, b.q, da, b.k, da, 0.0f, b.s, L, st, nullptr, {H, hd, hd, L * L});
    t5_bias_softmax(b.s, b.bucket, table(layer), b.p, H, L, st);
    gemm_.gemm<uint16_t>(false, false, L, hd, L, 1.0f, b.p, L, b.v, da, 0.0f, b.y, da, st, nullptr, {H, L * L, hd, hd});
    add_projection(b.y, da, p + "attn.o.weight");
    // x += fc2(fc1(h) * gelu_tanh(gate(h))), h = RMSNorm(x)
    rmsnorm_forward(
        NormToBf16{
            .x = b.x, .w = weight(p + "norm2.weight"), .y = b.h, .rstd = b.rstd, .N = L, .C = d, .eps = kT5NormEps},
        st);
    project(b.h, d, p + "ffn.gate.0.weight", df, b.g);
    project(b.h, d, p + "ffn.fc1.weight", df, b.f);
    gelu_tanh_gate_forward(b.g, b.f, b.g, L * df, st);
    add_projection(b.g, df, p + "ffn.fc2.weight");
  }
  rmsnorm_forward(
      NormToF32{.x = b.x, .w = weight("norm.weight"), .y = b.out, .rstd = b.rstd, .N = L, .C = d, .eps = kT5NormEps},
      st);
  std::vector<float> out(size_t(L * d));  // [L, dim]
  MS_CUDA_CHECK(cudaMemcpyAsync(out.data(), b.out, out.size() * 4, cudaMemcpyDeviceToHost, st));
  MS_CUDA_CHECK(cudaStreamSynchronize(st));
  check_t5_output(w, out);
  return out;
}

}  // namespace ms::cuda
