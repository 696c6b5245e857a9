// The Euler flow-matching sampler against closed-form ODE solutions (injected velocities), the
// shifted time grid, and determinism of model sampling; clip output mapping and prompt files.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/init.h"
#include "model/param_table.h"
#include "registry/registry.h"
#include "runtime/streamed_forward.h"
#include "sample/clip_output.h"
#include "sample/generate.h"
#include "sample/sampler.h"
#include "sample/train_samples.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train_util.h"

namespace ms {
namespace {

TEST(Sampler, ShiftedTimes) {
  const auto t = shifted_times({4, 3.0});
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.front(), 1.0);
  EXPECT_EQ(t.back(), 0.0);
  EXPECT_NEAR(t[2], 3.0 * 0.5 / (1.0 + 2.0 * 0.5), 1e-15);  // s = 0.5
  for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i], t[i - 1]);
  const auto linear = shifted_times({4, 1.0});
  for (size_t i = 0; i < linear.size(); ++i) EXPECT_NEAR(linear[i], 1.0 - double(i) / 4, 1e-15);
  EXPECT_THROW(shifted_times({0, 3.0}), Error);
  EXPECT_THROW(shifted_times({4, 0.0}), Error);
}

// The exact velocity of the straight path from noise to one data point x0 is (x - x0) / t
// (x_t = (1 - t) x0 + t eps, v = eps - x0): Euler follows a straight line exactly, so any grid lands
// on x0. This pins the sign and time conventions to train/flow_matching.h.
TEST(Sampler, StraightFlowLandsOnTheDataPoint) {
  const int64_t n = 37;
  std::vector<float> x(n), x0(n);
  fill_noise(7, x.data(), n);
  Rng r(8);
  for (auto& v : x0) v = float(r.uniform(-1, 1));
  const VelocityFn v = [&](const float* xt, double t, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = float((xt[i] - x0[size_t(i)]) / t);
  };
  std::vector<double> times;
  euler_sample({7, 3.0}, v, x.data(), n, [&](int64_t step, int64_t steps, double t0, double t1) {
    EXPECT_EQ(steps, 7);
    times.push_back(t0);
    if (step == steps) {
      EXPECT_EQ(t1, 0.0);
    }
  });
  EXPECT_EQ(times.size(), 7u);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(x[size_t(i)], x0[size_t(i)], 2e-6);  // float rounding of 7 steps
}

// Linear, time-dependent field v = (a + 2t) x: integrating from t = 1 to 0 gives
// x(0) = x(1) exp(-(a + 1)). Euler converges at first order in the step count.
TEST(Sampler, LinearFieldConvergesToClosedForm) {
  const double a = 0.7;
  const VelocityFn v = [&](const float* x, double t, float* out) {
    for (int i = 0; i < 3; ++i) out[i] = float((a + 2 * t) * x[i]);
  };
  auto error = [&](int64_t steps) {
    std::vector<float> x{1.5f, -0.25f, 3.0f};
    const std::vector<float> x1 = x;
    euler_sample({steps, 2.0}, v, x.data(), 3);
    double e = 0;
    for (int i = 0; i < 3; ++i)
      e = std::max(e, std::fabs(x[size_t(i)] - x1[size_t(i)] * std::exp(-(a + 1))) / std::fabs(x1[size_t(i)]));
    return e;
  };
  const double e100 = error(100), e800 = error(800);
  EXPECT_LT(e800, 2e-3);
  EXPECT_NEAR(e100 / e800, 8.0, 1.0);  // first order: 8x the steps, 1/8 the error
}

TEST(Sampler, NoiseIsSeeded) {
  std::vector<float> a(100), b(100), c(100);
  fill_noise(1, a.data(), 100);
  fill_noise(1, b.data(), 100);
  fill_noise(2, c.data(), 100);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// The tiny preset with Wan's initialisation; the head is re-drawn small and non-zero so the
// velocity depends on the input (Wan initialises it to zero).
struct TinyModel {
  ModelConfig c = preset_config("tiny");
  std::vector<float> params;
  TinyModel() {
    ParamTable table(c);
    params.resize(size_t(table.total()));
    init_params(table, c.dim, 11, params.data());
    Rng r(12);
    for (auto& p : params)
      if (p == 0) p = float(0.02 * r.normal());
  }
  std::vector<float> sample(const std::string& prompt, uint64_t seed) const {
    const auto ctx = prompt_context(c, prompt);
    const DataShape shape{3, 2, 8, 10};
    return generate_clip(c, cpu_model_forward(c, params.data(), shape, c.text_len), ctx.data(), c.text_len, shape,
                         {2, 5.0}, seed);
  }
};

TEST(Sampler, ModelSamplingIsDeterministic) {
  const TinyModel m;
  const auto a = m.sample("red circle moving left", 4), b = m.sample("red circle moving left", 4);
  ASSERT_EQ(a.size(), size_t(3 * 2 * 8 * 10));
  EXPECT_EQ(a, b);  // bit-identical
  EXPECT_NE(a, m.sample("red circle moving left", 5));
  EXPECT_NE(a, m.sample("blue square moving up", 4));
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
}

// The forward alone on a backend (runtime/streamed_forward.h), on the CPU backend with every stage resident and with
// two slots streamed per forward (a budget that holds no more): the resident CPU model's velocity bit for bit on the
// same bf16-rounded weights, forward after forward (the resident slots kept, the streamed ones refilled); and a whole
// guided sample through it is the CPU model's sample.
TEST(Sampler, StreamedForwardGivesTheResidentModelsBits) {
  TinyModel m;
  std::vector<uint16_t> bf16(m.params.size());
  for (size_t i = 0; i < bf16.size(); ++i) {
    bf16[i] = f32_to_bf16(m.params[i]);
    m.params[i] = bf16_to_f32(bf16[i]);  // the values the link carries
  }
  const DataShape shape{3, 5, 8, 10};
  const ModelDims d = ModelDims::make(m.c, 1, shape.frames, shape.height, shape.width, m.c.text_len);
  const ModelForward cpu = cpu_model_forward(m.c, m.params.data(), shape, m.c.text_len);
  const auto ctx = prompt_context(m.c, "red circle moving left"), neg = prompt_context(m.c, "blurry");
  const int64_t n = m.c.in_dim * d.F * d.H * d.W;
  StreamOptions two;
  two.forward_only = true;
  const int64_t two_slots = backend_arena(BackendKind::cpu, m.c, d, two).peak();
  for (const int64_t budget : {int64_t(0), two_slots}) {
    SCOPED_TRACE(budget ? "two slots streamed" : "every stage resident");
    CpuBackend be;
    StreamedForward streamed(
        m.c, d, be, [&] { return make_stage_runner(be, m.c, d); }, bf16.data(), budget);
    EXPECT_EQ(streamed.resident(), budget == 0);
    for (uint64_t seed : {21, 22}) {
      const std::vector<float> x = test::to_f32(test::randn(size_t(n), seed));
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      const float t = 612.5f;
      cpu(x.data(), &t, ctx.data(), want.data());
      streamed(x.data(), &t, ctx.data(), got.data());
      EXPECT_EQ(got, want) << "forward " << seed;
      // resident: the model crosses the link once; streamed: every forward
      EXPECT_EQ(streamed.last_uploads(), budget == 0 && seed == 22 ? 0 : ParamTable(m.c).total()) << seed;
    }
    const ModelForward forward = [&](const float* x, const float* t, const float* c, float* v) {
      streamed(x, t, c, v);
    };
    EXPECT_EQ(generate_clip(m.c, forward, ctx.data(), m.c.text_len, shape, {3, 5.0}, 7, {}, {neg.data(), 4.0}),
              generate_clip(m.c, cpu, ctx.data(), m.c.text_len, shape, {3, 5.0}, 7, {}, {neg.data(), 4.0}));
  }
}

// TI2V's image to video (Wan2.2's textimage2video.py): a stand-in model v = x_t, whose Euler steps have a closed
// form. The first latent frame is the image's from start to end, the model is asked at timesteps [0, t, t, ...]
// each step, and every other value is its seed noise times the product of (1 + dt) over the steps; without the image
// the same clip has one timestep and its first frame moves too. A T2V model refuses the image.
TEST(Sampler, ImageToVideoKeepsTheImagesFrame) {
  ModelConfig c;
  c.dim = 16, c.ffn_dim = 24, c.num_heads = 2, c.num_layers = 1, c.freq_dim = 8;
  c.in_dim = c.out_dim = 4, c.text_dim = 8, c.text_len = 4;
  c.patch_size = {1, 2, 2};
  c.model_type = "ti2v";
  c.validate();
  const DataShape shape{4, 3, 4, 6};  // [C, F, H, W] latents
  const int64_t plane = 4 * 6, run = 3 * plane, n = 4 * run;
  const auto image = test::to_f32(test::randn(size_t(4 * plane), 31));
  std::vector<std::vector<float>> asked;
  int64_t rows = 3;  // the timesteps a forward is made for: one per latent frame with the image
  const ModelForward model = [&](const float* xt, const float* t, const float*, float* v) {
    asked.emplace_back(t, t + rows);
    std::copy_n(xt, n, v);
  };
  std::vector<double> dts;
  const StepFn steps = [&](int64_t, int64_t, double t0, double t1) { dts.push_back(t1 - t0); };
  const std::vector<float> ctx(size_t(c.text_len * c.text_dim), 0.1f);
  const auto x = generate_clip(c, model, ctx.data(), c.text_len, shape, {4, 5.0}, 3, steps, {}, image.data());
  ASSERT_EQ(asked.size(), 4u);
  for (const auto& t : asked) {
    EXPECT_EQ(t[0], 0.0f);
    EXPECT_GT(t[1], 0.0f);
    EXPECT_EQ(t[2], t[1]);
  }
  EXPECT_GT(asked[0][1], asked[3][1]);
  const float asked_t0 = asked[0][1];
  std::vector<float> noise(static_cast<size_t>(n));
  fill_noise(3, noise.data(), n);
  double growth = 1;
  for (double dt : dts) growth *= 1 + float(dt);
  for (int64_t ch = 0; ch < 4; ++ch)
    for (int64_t i = 0; i < run; ++i) {
      const float got = x[size_t(ch * run + i)];
      if (i < plane)
        ASSERT_EQ(got, image[size_t(ch * plane + i)]) << ch << " " << i;
      else
        ASSERT_NEAR(got, noise[size_t(ch * run + i)] * growth, 1e-5) << ch << " " << i;
    }
  asked.clear();
  rows = 1;
  const auto t2v = generate_clip(c, model, ctx.data(), c.text_len, shape, {4, 5.0}, 3, {}, {});
  EXPECT_EQ(asked[0][0], asked_t0);              // one timestep per clip: the clip's t
  EXPECT_NEAR(t2v[0], noise[0] * growth, 1e-5);  // the first frame moves as the others
  c.model_type = "t2v";
  EXPECT_NE(test::error_of([&] {
              generate_clip(c, model, ctx.data(), c.text_len, shape, {4, 5.0}, 3, {}, {}, image.data());
            }).find("--image is for TI2V models"),
            std::string::npos);
}

TEST(Sampler, ClipToRgbMapsAndClamps) {
  const std::vector<float> x{-1.0f, 0.0f, 1.0f, 2.0f, -3.0f, 0.5f};  // [3, 1, 1, 2]
  const RgbVideo v = clip_to_rgb(x.data(), {3, 1, 1, 2}, 8);
  EXPECT_EQ(v.rgb, (std::vector<uint8_t>{0, 255, 0, 128, 255, 191}));  // pixel-major RGB
}

TEST(Sampler, OutputPathByModelSpace) {
  test::QuietLogs quiet;
  EXPECT_EQ(clip_output_path("a/b.MP4", 3), "a/b.MP4");
  EXPECT_EQ(clip_output_path("a/b.gif", 16), "a/b.safetensors");
  EXPECT_EQ(clip_output_path("b.safetensors", 3), "b.safetensors");
  try {
    clip_output_path("b.png", 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'.png'"), std::string::npos) << e.what();
  }
}

// A dataset with (own) or without captions of its own for samples.
struct PromptData : OneShapeDataset {
  std::vector<std::string> own;
  DataShape shape() const override { return {3, 1, 8, 8}; }
  DataSample get(int64_t) override { return {}; }
  std::vector<std::string> sample_prompts() const override { return own; }
};

TEST(Sampler, PromptsFileAndOptions) {
  test::TempDir dir;
  { std::ofstream(dir.file("p.txt")) << "  red circle moving left \n\n\tblue square moving up\r\n"; }
  EXPECT_EQ(read_prompts(dir.file("p.txt")),
            (std::vector<std::string>{"red circle moving left", "blue square moving up"}));
  TrainSampleOptions o;
  validate(o);
  PromptData none, shapes;
  shapes.own = {"red circle moving left"};
  resolve_sample_prompts(o, none, false);
  EXPECT_FALSE(o.draws()) << "data without captions of its own and no file: no samples";
  resolve_sample_prompts(o, shapes, false);
  EXPECT_EQ(o.prompt_list, shapes.own);
  EXPECT_TRUE(o.due(3, 3));  // when the run ends
  EXPECT_FALSE(o.due(2, 3));
  o.every = 5;
  EXPECT_THROW(resolve_sample_prompts(o, none, false), Error);  // --sample-every with no prompts anywhere
  o.prompts = dir.file("p.txt");
  resolve_sample_prompts(o, none, false);
  EXPECT_EQ(o.prompt_list.size(), 2u);
  EXPECT_TRUE(o.due(5, 7));
  EXPECT_FALSE(o.due(6, 7));
  EXPECT_TRUE(o.due(7, 7));
  o.no_final = true;
  EXPECT_FALSE(o.due(7, 7));
  o.format = "png";
  EXPECT_THROW(validate(o), Error);
  o.format = "mp4";
  o.every = -1;
  EXPECT_THROW(validate(o), Error);
  { std::ofstream(dir.file("empty.txt")) << "\n  \n"; }
  o.prompts = dir.file("empty.txt");
  EXPECT_THROW(resolve_sample_prompts(o, shapes, false), Error);
  o.prompts = dir.file("gone.txt");
  EXPECT_THROW(resolve_sample_prompts(o, shapes, false), Error);
  resolve_sample_prompts(o, shapes, true);  // a resumed run whose prompts file is gone: warned, no samples
  EXPECT_TRUE(o.prompt_list.empty());
}

}  // namespace
}  // namespace ms
