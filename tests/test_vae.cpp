// The video VAE against the float64 plain-loop reference of tests/vae_reference.h: its kernels, each layer kind
// through encode and decode on tiny configs at the chunk boundaries (1, 5, 9, 13 frames), chunking invariance, and
// bad input.
#include <cmath>
#include <map>

#include "ops/channel_norm.h"
#include "ops/conv3d.h"
#include "test_util.h"
#include "vae/vae_model.h"
#include "vae_reference.h"

namespace ms::test {
namespace {

// Wan's tiny test config: every layer kind, two temporal and three spatial halvings.
VaeConfig tiny_config() {
  VaeConfig c;
  c.dim = 8;
  c.dim_mult = {1, 2, 2, 2};
  c.num_res_blocks = 1;
  return c;
}

// Wan2.2's VAE at small widths: the 2x2 patch, a decoder wider than the encoder, every shortcut kind (spatial and
// spatio-temporal averages, an identity in the last encoder stage, duplications that halve the width).
VaeConfig tiny22_config() {
  VaeConfig c = VaeConfig::wan22();
  c.dim = 8;
  c.dec_dim = 12;
  c.z_dim = 4;
  c.dim_mult = {1, 2, 2, 2};
  c.latents_mean = {0.1f, -0.2f, 0.05f, 0.3f};
  c.latents_std = {0.5f, 1.2f, 0.8f, 0.9f};
  return c;
}

// A random clip in [-1, 1], [3, F, H, W].
Vid random_vid(int64_t F, int64_t H, int64_t W, uint64_t seed) {
  Vid v(3, F, H, W);
  v.v = randn(v.v.size(), seed, 0.5);
  for (double& x : v.v) x = std::clamp(x, -1.0, 1.0);
  return v;
}

}  // namespace

// Odd sizes; a null (zero) frame; stride 2 with padding after only; nearest upsampling; a pointwise kernel; and
// ci = 40 in double, whose unfolded frame outgrows the band budget, so it runs in several bands.
TEST(VaeKernels, ConvFrameMatchesPlainLoops) {
  const ConvFrameDims cases[] = {
      {.ci = 5,
       .co = 7,
       .kt = 3,
       .kh = 3,
       .kw = 3,
       .h = 9,
       .w = 11,
       .pad_top = 1,
       .pad_left = 1,
       .out_h = 9,
       .out_w = 11},
      {.ci = 3, .co = 4, .kh = 3, .kw = 3, .h = 10, .w = 7, .stride = 2, .out_h = 5, .out_w = 3},
      {.ci = 6,
       .co = 3,
       .kh = 3,
       .kw = 3,
       .h = 5,
       .w = 3,
       .up = 2,
       .pad_top = 1,
       .pad_left = 1,
       .out_h = 10,
       .out_w = 6},
      {.ci = 9, .co = 5, .h = 7, .w = 13, .out_h = 7, .out_w = 13},
      {.ci = 4, .co = 6, .kt = 3, .h = 3, .w = 5, .out_h = 3, .out_w = 5},
      {.ci = 40,
       .co = 5,
       .kt = 3,
       .kh = 3,
       .kw = 3,
       .h = 41,
       .w = 40,
       .pad_top = 1,
       .pad_left = 1,
       .out_h = 41,
       .out_w = 40},
  };
  uint64_t seed = 1;
  for (const auto& d : cases) {
    std::vector<std::vector<double>> frames;
    for (int64_t a = 0; a < d.kt; ++a) frames.push_back(randn(size_t(d.ci * d.h * d.w), seed++));
    std::vector<const double*> x;
    for (int64_t a = 0; a < d.kt; ++a)
      x.push_back(a == 0 && d.kt == 3 && d.ci == 5 ? nullptr : frames[size_t(a)].data());
    const auto w = randn(size_t(d.co * d.k()), seed++), b = randn(size_t(d.co), seed++);
    const auto want = naive_conv_frame(x, w, b, d);
    std::vector<double> y(want.size());
    cpu::conv3d_frame_forward<double>({.x = x.data(), .w = w.data(), .b = b.data(), .y = y.data(), .d = d});
    EXPECT_LT(rel_l2(y, want), 1e-13) << "ci " << d.ci << " stride " << d.stride << " up " << d.up;
    std::vector<std::vector<float>> ff;
    std::vector<const float*> xf;
    for (int64_t a = 0; a < d.kt; ++a) {
      ff.push_back(to_f32(frames[size_t(a)]));
      xf.push_back(x[size_t(a)] ? ff.back().data() : nullptr);
    }
    const auto wf = to_f32(w), bf = to_f32(b);
    std::vector<float> yf(want.size());
    cpu::conv3d_frame_forward<float>({.x = xf.data(), .w = wf.data(), .b = bf.data(), .y = yf.data(), .d = d});
    EXPECT_LT(rel_l2(yf, want), 1e-5);
  }
}

// Over 1000 pixels (two chunks and a partial vector), with and without SiLU, and a pixel of zeros (the 1e-12 floor).
TEST(VaeKernels, ChannelRmsNormMatchesPlainLoops) {
  const int64_t C = 7, N = 1003;
  auto x = randn(size_t(C * N), 4, 3.0);
  for (int64_t c = 0; c < C; ++c) x[size_t(c * N + 17)] = 0;
  const auto g = randn(size_t(C), 5, 0.1);
  std::vector<double> gamma(g.size());
  for (size_t i = 0; i < g.size(); ++i) gamma[i] = 1 + g[i];
  for (bool silu : {false, true}) {
    std::vector<double> want(x.size()), y(x.size());
    for (int64_t p = 0; p < N; ++p) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += x[size_t(c * N + p)] * x[size_t(c * N + p)];
      for (int64_t c = 0; c < C; ++c) {
        const double v =
            x[size_t(c * N + p)] / std::max(std::sqrt(ss), 1e-12) * std::sqrt(double(C)) * gamma[size_t(c)];
        want[size_t(c * N + p)] = silu ? v / (1 + std::exp(-v)) : v;
      }
    }
    cpu::channel_rms_norm_forward<double>(
        {.x = x.data(), .gamma = gamma.data(), .y = y.data(), .C = C, .N = N, .silu = silu});
    EXPECT_LT(rel_l2(y, want), 1e-14);
    EXPECT_EQ(y[17], 0.0);
    auto xf = to_f32(x), gf = to_f32(gamma);
    std::vector<float> yf(x.size());
    cpu::channel_rms_norm_forward<float>(
        {.x = xf.data(), .gamma = gf.data(), .y = yf.data(), .C = C, .N = N, .silu = silu});
    EXPECT_LT(rel_l2(yf, want), 1e-6);
  }
}

namespace {

// Encode and decode of a clip of F x H x W against the whole-clip reference: latents [z_dim, 1 + (F - 1) / 4,
// H / s, W / s] and the clamped video within 1e-4, with the clamp hiding at most a fifth of the decoded values.
void expect_matches_reference(const VaeWeights& w, int64_t F, int64_t H, int64_t W, uint64_t seed) {
  SCOPED_TRACE(std::to_string(F) + " frames");
  const VaeConfig& c = w.config();
  const VaeReference ref(w);
  const Vid video = random_vid(F, H, W, seed);
  const Vid want = ref.encode(video);
  ASSERT_EQ(want.c, c.z_dim);
  ASSERT_EQ(want.t, 1 + (F - 1) / 4);
  ASSERT_EQ(want.h * c.space_stride(), H);
  const auto vf = to_f32(video.v);
  std::vector<float> lat(want.v.size());
  vae_encode(w, vf.data(), F, H, W, lat.data());
  EXPECT_LT(rel_l2(lat, want.v), 1e-4);

  const Vid raw = ref.decode(want, false), dec = ref.decode(want);
  ASSERT_EQ(dec.t, F);
  ASSERT_EQ(dec.h, H);
  const auto lf = to_f32(want.v);
  std::vector<float> out(dec.v.size());
  vae_decode(w, lf.data(), want.t, want.h, want.w, out.data());
  EXPECT_LT(rel_l2(out, dec.v), 1e-4);
  int64_t clamped = 0;
  for (double v : raw.v) clamped += std::fabs(v) > 1;
  EXPECT_LT(double(clamped), 0.2 * double(raw.v.size())) << "the clamp hides too much of the comparison";
}

}  // namespace

// 1, 5, 9 and 13 frames: frame 0 alone, then one, two and three 4-frame chunks, each carrying the caches on.
TEST(Vae, EncodeAndDecodeMatchTheWholeClipReference) {
  const VaeWeights w = VaeWeights::random(tiny_config(), 11);
  for (int64_t F : {1, 5, 9, 13}) expect_matches_reference(w, F, 16, 24, uint64_t(20 + F));
}

// Wan2.2's VAE (vae2_2.py): 1, 5 and 9 frames, the first chunk's zero-padded averages and dropped duplicates
// included, against the reference written from its modules.
TEST(Vae, Wan22EncodeAndDecodeMatchTheWholeClipReference) {
  const VaeConfig c = tiny22_config();
  ASSERT_EQ(c.space_stride(), 16);
  const VaeWeights w = VaeWeights::random(c, 17);
  const int64_t H = 32, W = 48;
  for (int64_t F : {1, 5, 9}) expect_matches_reference(w, F, H, W, uint64_t(60 + F));
  // Larger chunks: the same result up to float rounding.
  const auto video = to_f32(random_vid(9, H, W, 70).v);
  std::vector<float> a(size_t(4 * 3 * 2 * 3)), b(a.size());
  vae_encode(w, video.data(), 9, H, W, a.data());
  vae_encode(w, video.data(), 9, H, W, b.data(), {.encode_frames = 8});
  EXPECT_LT(rel_l2(b, a), 1e-6);
  std::vector<float> da(size_t(3 * 9 * H * W)), db(da.size());
  vae_decode(w, a.data(), 3, 2, 3, da.data());
  vae_decode(w, a.data(), 3, 2, 3, db.data(), {.decode_latents = 2});
  EXPECT_LT(rel_l2(db, da), 1e-6);
  EXPECT_NE(error_of([&] {
              vae_encode(w, video.data(), 9, H, W, a.data(), {.tile_h = 40, .tile_w = 0});
            }).find("multiples of 16"),
            std::string::npos);
}

// The shapes Wan2.2's VAE has: 12 channels in and out, stages of 160, 320 and 640 with an identity-width last
// stage, a decoder of 1024 down to 256 whose upsamplers keep their width, and no shortcut parameters.
TEST(Vae, Wan22LayersHaveWansShapes) {
  const VaeConfig c = VaeConfig::wan22();
  check_vae_config(c, "Wan2.2");
  std::map<std::string, Shape> shapes;
  for (const auto& [name, shape] : vae_param_shapes(c)) shapes[name] = shape;
  EXPECT_EQ(shapes.at("encoder.conv1.weight"), (Shape{160, 12, 3, 3, 3}));
  EXPECT_EQ(shapes.at("encoder.downsamples.1.downsamples.0.shortcut.weight"), (Shape{320, 160, 1, 1, 1}));
  EXPECT_EQ(shapes.at("encoder.downsamples.1.downsamples.2.time_conv.weight"), (Shape{320, 320, 3, 1, 1}));
  EXPECT_EQ(shapes.count("encoder.downsamples.0.downsamples.2.time_conv.weight"), 0u);   // spatial only
  EXPECT_EQ(shapes.count("encoder.downsamples.3.downsamples.2.resample.1.weight"), 0u);  // the last stage
  EXPECT_EQ(shapes.at("encoder.head.2.weight"), (Shape{96, 640, 3, 3, 3}));
  EXPECT_EQ(shapes.at("conv1.weight"), (Shape{96, 96, 1, 1, 1}));
  EXPECT_EQ(shapes.at("decoder.conv1.weight"), (Shape{1024, 48, 3, 3, 3}));
  EXPECT_EQ(shapes.at("decoder.upsamples.0.upsamples.3.time_conv.weight"), (Shape{2048, 1024, 3, 1, 1}));
  EXPECT_EQ(shapes.at("decoder.upsamples.2.upsamples.0.shortcut.weight"), (Shape{512, 1024, 1, 1, 1}));
  EXPECT_EQ(shapes.at("decoder.upsamples.2.upsamples.3.resample.1.weight"), (Shape{512, 512, 3, 3}));
  EXPECT_EQ(shapes.count("decoder.upsamples.2.upsamples.3.time_conv.weight"), 0u);
  EXPECT_EQ(shapes.count("decoder.upsamples.3.upsamples.3.resample.1.weight"), 0u);
  EXPECT_EQ(shapes.at("decoder.head.2.weight"), (Shape{12, 256, 3, 3, 3}));
  for (const auto& [name, shape] : shapes) EXPECT_EQ(name.find("avg_shortcut"), std::string::npos) << name;
  VaeConfig bad = tiny22_config();
  bad.dim_mult = {1, 2, 3, 2};  // 16 -> 24 channels over 2x2x2 blocks: 128 values do not split into 24 groups
  EXPECT_NE(error_of([&] { check_vae_config(bad, "cfg"); }).find("regroup evenly"), std::string::npos);
}

// Temporal halving first, a 3-stage VAE (spatial stride 4), two residual blocks per stage.
TEST(Vae, AnotherConfigMatchesTheReference) {
  VaeConfig c;
  c.dim = 6;
  c.dim_mult = {1, 2, 3};
  c.num_res_blocks = 2;
  c.temperal_downsample = {true, false};
  const VaeWeights w = VaeWeights::random(c, 12);
  const VaeReference ref(w);
  const int64_t F = 9, H = 12, W = 20;
  const Vid video = random_vid(F, H, W, 33);
  const Vid want = ref.encode(video);
  ASSERT_EQ(want.t, 5);  // one temporal halving: 4 frames -> 2 latents
  const auto vf = to_f32(video.v);
  std::vector<float> lat(want.v.size());
  vae_encode(w, vf.data(), F, H, W, lat.data());
  EXPECT_LT(rel_l2(lat, want.v), 1e-4);
  const Vid dec = ref.decode(want);
  ASSERT_EQ(dec.t, F);
  const auto lf = to_f32(want.v);
  std::vector<float> out(dec.v.size());
  vae_decode(w, lf.data(), want.t, want.h, want.w, out.data());
  EXPECT_LT(rel_l2(out, dec.v), 1e-4);
}

// Larger chunks hold more at once and give the same result up to float rounding.
TEST(Vae, ChunkingIsAMemoryDeviceOnly) {
  const VaeWeights w = VaeWeights::random(tiny_config(), 13);
  const int64_t F = 13, H = 16, W = 8;
  const auto video = to_f32(random_vid(F, H, W, 44).v);
  std::vector<float> a(size_t(16 * 4 * 2 * 1)), b(a.size());
  vae_encode(w, video.data(), F, H, W, a.data());
  vae_encode(w, video.data(), F, H, W, b.data(), {.encode_frames = 12});
  EXPECT_LT(rel_l2(b, a), 1e-6);
  std::vector<float> da(size_t(3 * F * H * W)), db(da.size());
  vae_decode(w, a.data(), 4, 2, 1, da.data());
  vae_decode(w, a.data(), 4, 2, 1, db.data(), {.decode_latents = 3});
  EXPECT_LT(rel_l2(db, da), 1e-6);
}

TEST(Vae, FlopsCountWhatTheWalkDoes) {
  // One frame at 8x8 through conv1 (3 -> 8, 3x3x3) alone would be 2 * 8 * 81 * 64; the whole count is the sum over
  // every conv, so it must exceed that and grow linearly with the pixels.
  const VaeConfig c = tiny_config();
  const double f1 = vae_encode_flops(c, 1, 16, 16), f4 = vae_encode_flops(c, 1, 32, 32);
  EXPECT_GT(f1, 2.0 * 8 * 81 * 256);
  EXPECT_GT(f4, 3.9 * f1);  // attention's n^2 term makes it slightly superlinear
  EXPECT_LT(f4, 4.5 * f1);
  EXPECT_GT(vae_encode_flops(c, 5, 16, 16), 3 * f1);
  EXPECT_GT(vae_decode_flops(c, 5, 16, 16), vae_decode_flops(c, 1, 16, 16));
}

TEST(Vae, BadShapesAndConfigsAreNamed) {
  const VaeConfig c = tiny_config();
  EXPECT_NE(error_of([&] { check_vae_video_shape(c, 6, 16, 16, "video"); }).find("6 frames; the VAE takes 1 + 4k"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              check_vae_video_shape(c, 5, 20, 16, "video");
            }).find("height 20; the VAE takes multiples of 8 (e.g. 16 or 24)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_vae_video_shape(c, 5, 16, 4, "video"); }).find("width 4"), std::string::npos);
  VaeConfig bad = c;
  bad.attn_scales = {1.0};
  EXPECT_NE(error_of([&] { check_vae_config(bad, "cfg"); }).find("attn_scales must be []"), std::string::npos);
  bad = c;
  bad.temperal_downsample = {true};
  EXPECT_NE(error_of([&] { check_vae_config(bad, "cfg"); }).find("one per stage boundary, 3"), std::string::npos);
  bad = c;
  bad.temperal_downsample = {true, true, true};
  EXPECT_NE(error_of([&] { check_vae_config(bad, "cfg"); }).find("at most 2"), std::string::npos);
  bad = c;
  bad.latents_std[3] = 0;
  EXPECT_NE(error_of([&] { check_vae_config(bad, "cfg"); }).find("latents_std must be positive"), std::string::npos);
}

}  // namespace ms::test

namespace ms::test {

// Tiles as large as the frame change nothing; smaller ones give each tile's own result, blended by linear ramps
// over the overlaps, recomputed here tile by tile. 32-pixel tiles on 48 x 64 frames: row tiles cover latent rows
// 0-3 and 3-5, column tiles latent columns 0-3, 3-6 and 6-7 (tiles start every 24 pixels, 3 latents): each overlap
// is one latent, or 8 pixels of decoded video.
TEST(Vae, TilesBlendTheirOwnResults) {
  const VaeWeights w = VaeWeights::random(tiny_config(), 15);
  const int64_t F = 5, H = 48, W = 64, h = 6, wd = 8, T = 2;
  const auto video = to_f32(random_vid(F, H, W, 55).v);
  std::vector<float> whole(size_t(16 * T * h * wd)), same(whole.size()), tiled(whole.size());
  vae_encode(w, video.data(), F, H, W, whole.data());
  vae_encode(w, video.data(), F, H, W, same.data(), {.tile_h = 48, .tile_w = 64});
  EXPECT_EQ(same, whole);

  struct Tile {
    int64_t begin, size;  // latents
  };
  const std::vector<Tile> rows{{0, 4}, {3, 3}}, cols{{0, 4}, {3, 4}, {6, 2}};
  // Position p of tile k's output, in units of `unit` per latent: ramps (p + 1/2) / overlap in and out of the
  // neighbours' shared latent.
  auto weight = [](const std::vector<Tile>& s, size_t k, int64_t p, int64_t unit) {
    double g = 1;
    if (k > 0 && p < unit) g *= (double(p) + 0.5) / double(unit);
    const int64_t size = s[k].size * unit;
    if (k + 1 < s.size() && p >= size - unit) g *= (double(size - p) - 0.5) / double(unit);
    return g;
  };
  // Each tile run alone through `run(in, in_h, in_w, out)`, its output blended into want [C, out_h, out_w].
  auto blend = [&](const std::vector<float>& in, int64_t ct_in, int64_t in_unit, int64_t ct_out, int64_t out_unit,
                   const auto& run) {
    const int64_t in_h = h * in_unit, in_w = wd * in_unit, out_h = h * out_unit, out_w = wd * out_unit;
    std::vector<double> want(size_t(ct_out * out_h * out_w));
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t q = 0; q < cols.size(); ++q) {
        const int64_t th = rows[r].size * in_unit, tw = cols[q].size * in_unit;
        const int64_t oh = rows[r].size * out_unit, ow = cols[q].size * out_unit;
        std::vector<float> sub(size_t(ct_in * th * tw)), out(size_t(ct_out * oh * ow));
        for (int64_t ct = 0; ct < ct_in; ++ct)
          for (int64_t i = 0; i < th; ++i)
            for (int64_t j = 0; j < tw; ++j)
              sub[size_t((ct * th + i) * tw + j)] =
                  in[size_t((ct * in_h + rows[r].begin * in_unit + i) * in_w + cols[q].begin * in_unit + j)];
        run(sub.data(), th, tw, out.data());
        for (int64_t ct = 0; ct < ct_out; ++ct)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j)
              want[size_t((ct * out_h + rows[r].begin * out_unit + i) * out_w + cols[q].begin * out_unit + j)] +=
                  weight(rows, r, i, out_unit) * weight(cols, q, j, out_unit) * out[size_t((ct * oh + i) * ow + j)];
      }
    return want;
  };
  vae_encode(w, video.data(), F, H, W, tiled.data(), {.tile_h = 32, .tile_w = 32});
  const auto want = blend(video, 3 * F, 8, 16 * T, 1, [&](const float* in, int64_t th, int64_t tw, float* out) {
    vae_encode(w, in, F, th, tw, out);
  });
  EXPECT_LT(rel_l2(tiled, want), 1e-6);
  EXPECT_GT(rel_l2(tiled, whole), 1e-3);  // the seams do change the result

  std::vector<float> dec_tiled(size_t(3 * F * H * W));
  vae_decode(w, whole.data(), T, h, wd, dec_tiled.data(), {.tile_h = 32, .tile_w = 32});
  const auto want_dec = blend(whole, 16 * T, 1, 3 * F, 8, [&](const float* in, int64_t th, int64_t tw, float* out) {
    vae_decode(w, in, T, th, tw, out);
  });
  EXPECT_LT(rel_l2(dec_tiled, want_dec), 1e-6);
}

}  // namespace ms::test
