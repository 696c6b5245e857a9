// A streamed training step on the GPU (StreamedModel over CudaBackend and CudaStageRunner): its loss and every
// weight gradient against the whole model in float64 (the stage orchestration over RefOps), and against itself,
// bit for bit, under every schedule: K = 2 weight slots or one per stage, block inputs on the device or through
// host memory, and the second of two steps (the other input set) against a fresh model; and two ranks joined over
// NCCL's stand-in (fake_nccl.h) against one-rank steps. Skipped without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_stage_runner.h"
#include "backend/cuda/nccl.h"
#include "core/aligned.h"
#include "fake_nccl.h"
#include "model/block_impl.h"
#include "model/head_impl.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/stem_impl.h"
#include "model/workspace.h"
#include "model_reference.h"
#include "runtime/arena.h"
#include "runtime/shards.h"
#include "runtime/streamed_forward.h"
#include "runtime/streamed_model.h"
#include "small_config.h"
#include "thread_ranks.h"

namespace ms::test {
namespace {

// One step's inputs, fp32 (the context already padded to text_len, as the trainer passes it).
struct StepData {
  std::vector<float> xt, t, context, target;
};

StepData step_data(const ModelConfig& c, const ModelDims& d, uint64_t seed) {
  const int64_t video = d.B * d.F * d.H * d.W;
  StepData s{to_f32(randn(size_t(video * c.in_dim), seed)),
             {},
             to_f32(randn(size_t(d.B * d.Lt * c.text_dim), seed + 1)),
             to_f32(randn(size_t(video * c.out_dim), seed + 2))};
  for (int64_t b = 0; b < d.B; ++b) s.t.push_back(float(97 + 311 * b));
  return s;
}

// Every parameter N(0, 0.4^2) and norm weights near 1, rounded to bf16.
Bf16Input model_weights(const ParamTable& table, uint64_t seed) {
  Bf16Input w = random_bf16(size_t(table.total()), seed, 0.4);
  for (const ParamInfo& p : table.params())
    if (p.name.find("norm") != std::string::npos && p.name.find(".weight") != std::string::npos)
      for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
        w.bits[size_t(i)] = f32_to_bf16(float(w.values[size_t(i)] + 1.0));
        w.values[size_t(i)] = double(bf16_to_f32(w.bits[size_t(i)]));
      }
  return w;
}

struct StepResult {
  double loss;
  std::vector<float> grads;  // [P] in the table's layout
};

// `steps` streamed steps on a fresh CUDA backend and model; the last step's loss and gradients. With comm: rank
// comm->rank() of a distributed run (o.ranks of them) whose devices nccl joins: the weights it uploads and the
// gradients it receives are its shards (runtime/shards.h: grads in the shard pool's layout), the ranks' gradients
// weighted by rank_weight.
StepResult cuda_steps(const ModelConfig& c, const ModelDims& d, const StreamOptions& o, const Bf16Input& w,
                      const std::vector<StepData>& steps, Communicator* comm = nullptr,
                      DeviceCollectives* nccl = nullptr, std::span<const float> rank_weight = {}) {
  const ParamTable table(c);
  const Shards shards(table, comm ? comm->rank() : 0, o.ranks);
  AlignedBuffer<uint16_t> weights(size_t(shards.total()));
  AlignedBuffer<float> grads(size_t(shards.total()));
  for (size_t s = 0; s < table.stages().size(); ++s) {
    const StageShard& sh = shards.stage(s);
    std::copy_n(w.bits.begin() + table.stages()[s].offset + sh.begin, sh.count, weights.data() + sh.offset);
  }
  std::vector<StepData> inputs = steps;  // pinned below: what enqueue_inputs copies from
  StepResult r{0, {}};
  {
    CudaBackend be;
    be.pin_host(weights.data(), weights.size() * 2);
    be.pin_host(grads.data(), grads.size() * 4);
    for (StepData& s : inputs)
      for (auto* v : {&s.xt, &s.t, &s.context, &s.target}) be.pin_host(v->data(), v->size() * 4);
    {
      StreamedModel m(c, d, be, o, std::make_unique<cuda::CudaStageRunner>(c, d), comm, nccl);
      EXPECT_EQ(m.arena_bytes(), m.plan().peak());
      const GradRoute route{[&](int, int s) { return grads.data() + shards.stage(size_t(s)).offset; },
                            [](int) { return Event{}; }, [](int, int, float*, Event) {}};
      for (const StepData& s : inputs) {
        m.enqueue_inputs(d, s.xt.data(), s.t.data(), s.context.data(), s.target.data());
        m.enqueue_step(
            weights.data(), route, [](int) { return Event{}; }, rank_weight);
        r.loss = m.finish();
      }
    }
    be.sync_all();
    for (StepData& s : inputs)
      for (auto* v : {&s.xt, &s.t, &s.context, &s.target}) be.unpin_host(v->data());
  }
  r.grads.assign(grads.data(), grads.data() + grads.size());
  return r;
}

struct Reference {
  double loss;
  std::vector<double> grads;
  std::vector<double> velocity;  // the forward's [B, out_dim, F, H, W]
};

// The same step in float64: every stage resident, the orchestration the GPU runs, over RefOps. backward false: the
// forward's velocity alone.
Reference float64_step(const ModelConfig& c, const ModelDims& d, const Bf16Input& w, const StepData& s,
                       bool backward = true) {
  const ParamTable table(c);
  const auto& st = table.stages();
  const int64_t ND = d.N() * c.dim, L = c.num_layers;
  auto visit = [&](auto& ws, auto&& f) { visit_model_workspace(c, d, ws, f); };
  std::vector<double> buffer(size_t(workspace_bytes<ModelWorkspace<double>>(visit, 8) / 8));
  const ModelWorkspace<double> ws = bind_workspace<ModelWorkspace<double>>(buffer.data(), visit, 8);
  const std::vector<double> xt(s.xt.begin(), s.xt.end()), t(s.t.begin(), s.t.end()),
      context(s.context.begin(), s.context.end()), target(s.target.begin(), s.target.end());
  std::vector<double> velocity(target.size()), dvelocity(target.size());
  Reference r{0, std::vector<double>(size_t(table.total())), {}};
  const double* p = w.values.data();
  double* g = r.grads.data();
  RefOps ops;
  stem_impl::stem_forward(ops, c, d, bind_stem(c, p + st.front().offset), xt.data(), t.data(), context.data(), ws.stem);
  std::copy(ws.stem.x0, ws.stem.x0 + ND, ws.xs);
  for (int64_t b = 0; b < L; ++b)
    block_impl::block_forward(ops, c, d, b, bind_block(c, p + st[size_t(b + 1)].offset), ws.xs + b * ND, ws.stem.e0,
                              ws.stem.ctx, ws.block, ws.xs + (b + 1) * ND);
  const HeadW<const double*> head = bind_head(c, p + st.back().offset);
  head_impl::head_forward(ops, c, d, head, ws.xs + L * ND, ws.stem.e, ws.head, velocity.data());
  if (!backward) {
    r.velocity = velocity;
    return r;
  }
  const double n = double(velocity.size());
  for (size_t i = 0; i < velocity.size(); ++i) {  // mean squared error and its gradient, written out
    r.loss += (velocity[i] - target[i]) * (velocity[i] - target[i]) / n;
    dvelocity[i] = 2 * (velocity[i] - target[i]) / n;
  }
  std::fill(ws.de, ws.de + d.B * c.dim, 0.0);
  std::fill(ws.de0, ws.de0 + d.B * 6 * c.dim, 0.0);
  std::fill(ws.dctx, ws.dctx + d.B * d.Lt * c.dim, 0.0);
  const int64_t head_act = head_scratch_act_numel(c, d);
  head_impl::head_backward(ops, c, d, head, ws.xs + L * ND, ws.head, dvelocity.data(), ws.dres, ws.de,
                           bind_head(c, g + st.back().offset), ws.scratch, ws.scratch + head_act);
  for (int64_t b = L - 1; b >= 0; --b)
    block_impl::block_backward(ops, c, d, b, bind_block(c, p + st[size_t(b + 1)].offset), ws.xs + b * ND, ws.stem.e0,
                               ws.stem.ctx, ws.block, ws.block_grads, ws.dres, ws.dres, ws.de0, ws.dctx,
                               bind_block(c, g + st[size_t(b + 1)].offset));
  stem_impl::stem_backward(ops, c, d, bind_stem(c, p + st.front().offset), ws.stem, ws.dres, ws.de, ws.de0, ws.dctx,
                           bind_stem(c, g + st.front().offset), static_cast<double*>(nullptr),
                           static_cast<double*>(nullptr), ws.scratch, ws.scratch);
  return r;
}

ModelConfig streamed_config() {
  ModelConfig c = small_config();
  c.out_dim = c.in_dim;  // the flow target lives in the input space, as the trainer requires
  c.num_layers = 3;
  return c;
}

// The model the step tests train: 3 blocks, 2 clips of 3 x 2 x 3 tokens, context 5 of 7, random weights.
struct StreamedCase {
  ModelConfig c;
  ModelDims d;
  ParamTable table{c};
  Bf16Input w;
  // 2 clips of frames x height x width latents (patches 1 x 2 x 2), context 5 of 7.
  explicit StreamedCase(uint64_t seed, const ModelConfig& config = streamed_config(), int64_t frames = 3,
                        int64_t height = 4, int64_t width = 6)
      : c(config), d(ModelDims::make(c, 2, frames, height, width, 5)), w(model_weights(table, seed)) {}
};

// One step's loss and every stage's gradients against float64, with the tolerances argued below.
void expect_step_matches_float64(const StreamedCase& k, uint64_t seed) {
  const StepData s = step_data(k.c, k.d, seed);
  const StepResult got = cuda_steps(k.c, k.d, StreamOptions{}, k.w, {s});
  const Reference ref = float64_step(k.c, k.d, k.w, s);
  // Each stage alone is within 1.5e-2 of float64 (test_stages.cpp: a CPU emulation of the bf16 roundings); five
  // stages in a chain compound that, so the whole step gets the stage tests' 6e-2 per parameter and 2e-2 on the
  // loss (a mean over the velocity, whose error is the head's 3e-2 output tolerance averaged).
  EXPECT_NEAR(got.loss, ref.loss, 2e-2 * ref.loss);
  // Per stage, DSA's offset network apart (its tolerance: model_reference.h).
  for (size_t i = 0; i < k.table.stages().size(); ++i)
    for (const bool offsets : {false, true}) {
      std::vector<float> g;
      std::vector<double> r;
      for (const ParamInfo& p : k.table.params())
        if (p.stage == int(i) && in_offset_network(p.name) == offsets) {
          const auto b = long(p.offset), e = long(p.offset + p.numel);
          g.insert(g.end(), got.grads.begin() + b, got.grads.begin() + e);
          r.insert(r.end(), ref.grads.begin() + b, ref.grads.begin() + e);
        }
      if (!g.empty())
        expect_close("grad " + k.table.stages()[i].name + (offsets ? " offset network" : ""), g, r,
                     offsets ? kOffsetStepTol : 6e-2);
    }
}

TEST(CudaStreamed, StepMatchesFloat64) {
  MS_REQUIRE_GPU();
  expect_step_matches_float64(StreamedCase(401), 402);
}

// Window attention (shifted on block 1) through the whole streamed step.
TEST(CudaStreamed, WindowStepMatchesFloat64) {
  MS_REQUIRE_GPU();
  expect_step_matches_float64(StreamedCase(421, with_attention(streamed_config(), "window", {2, 2, 2})), 422);
}

// DSA with its offset network through the whole streamed step, on 5 x 3 x 5 tokens per clip (the offset networks'
// tolerance: model_reference.h).
TEST(CudaStreamed, DsaStepMatchesFloat64) {
  MS_REQUIRE_GPU();
  expect_step_matches_float64(StreamedCase(441, with_attention(streamed_config(), "dsa", {3, 3, 3}), 5, 6, 10), 442);
}

// Deterministic kernels and a schedule that only moves data: every way of streaming gives the same bits, with dense,
// window and dsa attention.
void expect_every_schedule_same(const StreamedCase& k) {
  const auto& [c, d, table, w] = k;
  const StepData first = step_data(c, d, 412), second = step_data(c, d, 415);
  const StepResult base = cuda_steps(c, d, StreamOptions{}, w, {second});
  StreamOptions every;
  every.prefetch = int(table.stages().size());  // every stage in a slot of its own
  StreamOptions offloaded;
  offloaded.prefetch = 3;
  offloaded.offload_activations = true;
  StreamOptions serial;
  serial.serialize = true;
  for (const auto& [name, o, steps] : {std::tuple{"every stage resident", every, std::vector{second}},
                                       {"checkpoints offloaded", offloaded, std::vector{second}},
                                       {"serialized", serial, std::vector{second}},
                                       {"second step", StreamOptions{}, std::vector{first, second}}}) {
    const StepResult r = cuda_steps(c, d, o, w, steps);
    EXPECT_EQ(r.loss, base.loss) << c.attention.type << ", " << name;
    EXPECT_EQ(r.grads, base.grads) << c.attention.type << ", " << name;
  }
}

TEST(CudaStreamed, EveryScheduleGivesTheSameBits) {
  MS_REQUIRE_GPU();
  expect_every_schedule_same(StreamedCase(411));
  expect_every_schedule_same(StreamedCase(431, with_attention(streamed_config(), "window", {2, 2, 2})));
  expect_every_schedule_same(StreamedCase(451, with_attention(streamed_config(), "dsa", {3, 3, 3})));
}

// Two ranks, each a thread with a CUDA backend and streamed model of its own, joined by NcclCollectives over the NCCL
// stand-in (fake_nccl.h): each gathers the other's weight shards on its H2D stream and receives, in its gradient
// shards, the ranks' gradients weighted 3:1 (runtime/shards.h) -- against one-rank steps on each rank's data, summed
// the same way in float64. A rank computes from the same bf16 weights as one rank alone, so its loss is the same bits.
TEST(CudaStreamed, TwoRanksOverNcclReceiveTheirWeightedGradientSum) {
  MS_REQUIRE_GPU();
  const StreamedCase k(461);
  const std::vector<StepData> data{step_data(k.c, k.d, 462), step_data(k.c, k.d, 463)};
  const std::vector<float> weight{0.75f, 0.25f};
  const std::vector<StepResult> alone{cuda_steps(k.c, k.d, {}, k.w, {data[0]}),
                                      cuda_steps(k.c, k.d, {}, k.w, {data[1]})};
  FakeNccl::reset();
  const cuda::NcclApi api = FakeNccl::api();
  std::vector<StepResult> got(2);
  ThreadRanks(2).run([&](Communicator& comm) {
    cuda::NcclCollectives nccl(api, comm, 600);
    StreamOptions o;
    o.ranks = 2;
    got[size_t(comm.rank())] = cuda_steps(k.c, k.d, o, k.w, {data[size_t(comm.rank())]}, &comm, &nccl, weight);
  });
  EXPECT_GT(FakeNccl::collectives, 4);  // beyond the two connecting collectives of each rank
  EXPECT_EQ(FakeNccl::misuses, 0);
  FakeNccl::reset();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[size_t(r)].loss, alone[size_t(r)].loss) << "rank " << r;
    const Shards shards(k.table, r, 2);
    std::vector<double> want, mine;
    for (size_t s = 0; s < k.table.stages().size(); ++s) {
      const StageShard& sh = shards.stage(s);
      for (int64_t i = 0; i < sh.count; ++i) {
        const size_t at = size_t(k.table.stages()[s].offset + sh.begin + i);
        want.push_back(0.75 * alone[0].grads[at] + 0.25 * alone[1].grads[at]);
        mine.push_back(got[size_t(r)].grads[size_t(sh.offset + i)]);
      }
    }
    EXPECT_EQ(int64_t(mine.size()), shards.total());
    expect_close("two_ranks_grads_rank" + std::to_string(r), mine, want, 1e-6);
  }
}

// Sampling's forward alone on the GPU (runtime/streamed_forward.h), with every stage resident and with two slots
// streamed (a budget that holds no more), twice each (the second forward reuses the resident stages, the streamed
// ones are uploaded again): the velocity against the float64 forward within the streamed step's tolerance.
TEST(CudaStreamed, SamplingForwardMatchesFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = streamed_config();
  const ModelDims d = ModelDims::make(c, 1, 3, 4, 6, c.text_len);
  const ParamTable table(c);
  const Bf16Input w = model_weights(table, 471);
  AlignedBuffer<uint16_t> bits(w.bits.size());
  std::copy(w.bits.begin(), w.bits.end(), bits.data());
  StreamOptions two;
  two.forward_only = true;
  const int64_t two_slots = streamed_arena(c, d, cuda::kComputeBytes, cuda::kComputeBytes, two).peak();
  for (const int64_t budget : {int64_t(0), two_slots}) {
    CudaBackend be;
    StreamedForward forward(
        c, d, be, [&] { return std::make_unique<cuda::CudaStageRunner>(c, d); }, bits.data(), budget);
    EXPECT_EQ(forward.resident(), budget == 0);
    for (uint64_t seed : {472, 475}) {
      const StepData s = step_data(c, d, seed);
      std::vector<float> v(s.target.size(), std::nanf(""));
      forward(s.xt.data(), s.t.data(), s.context.data(), v.data());
      EXPECT_EQ(forward.last_uploads(), budget == 0 && seed == 475 ? 0 : table.total()) << seed;
      expect_close(cat(budget ? "streamed" : "resident", "_forward_", seed), v,
                   float64_step(c, d, w, s, false).velocity, 3e-2);
    }
  }
}

// The arena is what `megaslide plan` accounts for the GPU (act_bytes 2), and a budget below it is refused.
TEST(CudaStreamed, ArenaIsThePlanAndABudgetBelowItIsRefused) {
  MS_REQUIRE_GPU();
  const ModelConfig c = streamed_config();
  const ModelDims d = ModelDims::make(c, 1, 5, 6, 4, 7);
  ArenaOptions ao;
  ao.prefetch = 2;
  const DevicePlan plan = plan_device(c, d, ao);
  CudaBackend be;
  {
    StreamedModel m(c, d, be, StreamOptions{}, std::make_unique<cuda::CudaStageRunner>(c, d));
    EXPECT_EQ(m.arena_bytes(), plan.peak());
  }
  StreamOptions tight;
  tight.device_memory = plan.peak() - 1;
  const std::string e =
      error_of([&] { StreamedModel m(c, d, be, tight, std::make_unique<cuda::CudaStageRunner>(c, d)); });
  EXPECT_NE(e.find("--device-memory " + std::to_string(plan.peak())), std::string::npos) << e;
}

// A model over the kernels' limits (window attention's flash kernels take head dims up to 128) is refused before
// anything is allocated, naming the way out.
TEST(CudaStreamed, AttentionOverTheKernelsLimitsIsRefusedWithAMessage) {
  MS_REQUIRE_GPU();
  ModelConfig c = streamed_config();
  c.attention.type = AttentionType::window;
  c.num_heads = 2;
  c.dim = 2 * 136;  // head dim 136
  const ModelDims d = ModelDims::make(c, 1, 3, 4, 6, 5);
  const std::string e = error_of([&] { cuda::CudaStageRunner r(c, d); });
  EXPECT_NE(e.find("head dims up to 128, not 136"), std::string::npos) << e;
  EXPECT_NE(e.find("--backend cpu"), std::string::npos) << e;
}

}  // namespace
}  // namespace ms::test
