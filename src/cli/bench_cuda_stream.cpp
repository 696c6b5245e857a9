#include "cli/bench_cuda_stream.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_stage_runner.h"
#include "cli/cuda_timing.h"
#include "core/aligned.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/flops.h"
#include "model/param_table.h"
#include "plan/plan.h"
#include "runtime/arena.h"
#include "runtime/streamed_forward.h"
#include "runtime/streamed_model.h"

namespace ms::cli {
namespace {

// n values from a repeated random tile (GEMMs run faster on zeros or constants than on real data).
template <class T, class F>
void fill_tiled(T* p, size_t n, F&& value) {
  std::vector<T> tile(size_t(1) << 20);
  Rng rng(5);
  for (T& x : tile) x = value(rng.normal());
  for (size_t off = 0; off < n; off += tile.size()) std::copy_n(tile.begin(), std::min(tile.size(), n - off), p + off);
}

struct HostBuffers {
  AlignedBuffer<uint16_t> weights;  // [P] bf16
  AlignedBuffer<float> grads;       // [P] fp32
  AlignedBuffer<float> xt, t, context, target;
};

// Median seconds of `repeats` streamed steps (after one warm-up) in mode `o`; the arena's bytes, and the device
// memory in use while the model exists (cudaMemGetInfo: the arena, cuBLASLt's workspace, the CUDA context's growth).
struct ModeResult {
  double step_s;
  int64_t arena_bytes, device_used_bytes, uploaded_bytes;
};

ModeResult run_mode(const ModelConfig& c, const ModelDims& d, CudaBackend& be, HostBuffers& h, const StreamOptions& o,
                    int repeats) {
  size_t free_before = 0, free_during = 0, total = 0;
  MS_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  StreamedModel m(c, d, be, o, std::make_unique<cuda::CudaStageRunner>(c, d));
  const ParamTable& table = m.table();
  const GradRoute route{[&](int, int s) { return h.grads.data() + table.stages()[size_t(s)].offset; },
                        [](int) { return Event{}; }, [](int, int, float*, Event) {}};
  std::vector<double> t;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    m.enqueue_inputs(d, h.xt.data(), h.t.data(), h.context.data(), h.target.data());
    m.enqueue_step(h.weights.data(), route, [](int) { return Event{}; });
    m.finish();
    if (r == 0) MS_CUDA_CHECK(cudaMemGetInfo(&free_during, &total));
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return {median(std::move(t)), m.arena_bytes(), int64_t(free_before) - int64_t(free_during), m.uploaded_weights() * 2};
}

// Median seconds of `repeats` forwards alone (sampling's, runtime/streamed_forward.h) after one warm-up, with
// `budget` as the arena's (0: the device's); whether every stage stayed resident.
std::pair<double, bool> run_forward(const ModelConfig& c, const ModelDims& d, CudaBackend& be, HostBuffers& h,
                                    int64_t budget, int repeats) {
  StreamedForward f(
      c, d, be, [&] { return std::make_unique<cuda::CudaStageRunner>(c, d); }, h.weights.data(), budget);
  std::vector<float> v(h.target.size());
  std::vector<double> t;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f(h.xt.data(), h.t.data(), h.context.data(), v.data());
    if (r > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return {median(std::move(t)), f.resident()};
}

}  // namespace

// The `plan` profile of a GPU by its name ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 NVL"), or "".
std::string profile_of(const std::string& device) {
  if (device.find("H200") != std::string::npos) return "h200";
  if (device.find("H100") != std::string::npos)
    return device.find("NVL") != std::string::npos ? "h100-nvl" : "h100-sxm";
  return "";
}

nlohmann::json bench_cuda_stream(const StreamBenchShape& s, double gemm_ceiling, const std::string& device) {
  ModelConfig c = preset_config("wan2.1-14b");
  c.num_layers = s.layers;
  c.attention.type = s.attention;
  c.validate();
  const auto& ps = c.patch_size;
  const ModelDims d = ModelDims::make(c, 1, s.grid[0] * ps[0], s.grid[1] * ps[1], s.grid[2] * ps[2], c.text_len);
  const ParamTable table(c);
  const int64_t P = table.total(), video = d.B * d.F * d.H * d.W;
  HostBuffers h{AlignedBuffer<uint16_t>(size_t(P)),
                AlignedBuffer<float>(size_t(P)),
                AlignedBuffer<float>(size_t(video * c.in_dim)),
                AlignedBuffer<float>(size_t(d.B)),
                AlignedBuffer<float>(size_t(d.B * d.Lt * c.text_dim)),
                AlignedBuffer<float>(size_t(video * c.out_dim))};
  fill_tiled(h.weights.data(), h.weights.size(), [](double v) { return f32_to_bf16(float(0.02 * v)); });
  for (auto* b : {&h.xt, &h.context, &h.target}) fill_tiled(b->data(), b->size(), [](double v) { return float(v); });
  std::fill(h.t.data(), h.t.data() + h.t.size(), 500.0f);
  ArenaOptions ao;  // the plan of K = 2 is the budget: the model's weights are many times larger
  const DevicePlan plan = plan_device(c, d, ao);
  nlohmann::json r{{"tokens", d.N()},
                   {"grid", {s.grid[0], s.grid[1], s.grid[2]}},
                   {"layers", c.num_layers},
                   {"attention", name_of(s.attention)},
                   {"weights_bytes", P * 2},
                   {"plan_bytes", plan.peak()},
                   {"budget_bytes", plan.peak()}};
  {
    CudaBackend be;
    for (auto* b : {&h.xt, &h.t, &h.context, &h.target}) be.pin_host(b->data(), b->size() * 4);
    be.pin_host(h.weights.data(), h.weights.size() * 2);
    be.pin_host(h.grads.data(), h.grads.size() * 4);
    StreamOptions on;
    on.device_memory = plan.peak();
    StreamOptions serial = on, copies = on;
    serial.serialize = true;
    copies.skip_compute = true;
    const ModeResult a = run_mode(c, d, be, h, on, s.repeats), b = run_mode(c, d, be, h, serial, s.repeats),
                     x = run_mode(c, d, be, h, copies, s.repeats);
    r["step_s"] = a.step_s;
    r["serialized_step_s"] = b.step_s;
    r["copies_only_s"] = x.step_s;
    r["arena_bytes"] = a.arena_bytes;
    r["device_used_bytes"] = a.device_used_bytes;
    r["h2d_bytes_per_step"] = a.uploaded_bytes;
    r["d2h_bytes_per_step"] = P * 4;
  }
  {  // sampling's forward: every stage resident, and two slots streamed (the forward-only arena of K = 2 as budget)
    CudaBackend be;
    StreamOptions two;
    two.forward_only = true;
    const int64_t two_slots = streamed_arena(c, d, cuda::kComputeBytes, cuda::kComputeBytes, two).peak();
    const auto [resident_s, resident] = run_forward(c, d, be, h, 0, s.repeats);
    r["forward_resident_s"] = resident_s;
    r["forward_all_resident"] = resident;
    r["forward_streamed_s"] = run_forward(c, d, be, h, two_slots, s.repeats).first;
  }
  const double gemm = model_step_flops(c, d).gemm, step = r["step_s"].get<double>();
  const double serialized = r["serialized_step_s"].get<double>(), copies = r["copies_only_s"].get<double>();
  r["mfu"] = gemm / step / gemm_ceiling;
  r["serialized_mfu"] = gemm / serialized / gemm_ceiling;
  // The transfer time hidden: what overlapping saved against the serialized step, over the copies' own time.
  r["transfer_hidden"] = std::clamp((serialized - step) / copies, 0.0, 1.0);
  r["h2d_gbps_copies_only"] = r["h2d_bytes_per_step"].get<double>() / copies / 1e9;
  const double forward = forward_flops(c, d).gemm;
  r["forward_resident_mfu"] = forward / r["forward_resident_s"].get<double>() / gemm_ceiling;
  r["forward_streamed_mfu"] = forward / r["forward_streamed_s"].get<double>() / gemm_ceiling;
  if (const std::string profile = profile_of(device); !profile.empty()) {
    PlanInputs in;  // the same model and tokens (latent = pixels: VAE stride 1) on the card's profile
    in.model = c;
    in.video = {1, d.F, d.H, d.W, {1, 1, 1}};
    in.hw = hardware_profile(profile);
    const Plan p = make_plan(in);
    r["plan_profile"] = profile;
    r["model_mfu"] = model_step_flops(c, d).total() / step / in.hw.flops_per_s;
    r["plan_mfu"] = p.mfu;
    r["plan_step_s"] = p.step_s;
  }
  return r;
}

}  // namespace ms::cli
