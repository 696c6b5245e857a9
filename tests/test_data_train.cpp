// `megaslide train --data dataset.toml` end to end on a tiny video folder, and its resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "core/check.h"
#include "core/rng.h"
#include "io/video.h"
#include "model/config.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train/batch.h"
#include "train/trainer.h"
#include "train_util.h"
#include "video_util.h"

namespace ms::test {
namespace {

// Three clips of 5 frames (odd sizes, two containers) and one corrupt file; 2-frame clips at 8x8.
std::string make_dataset(const TempDir& dir) {
  std::filesystem::create_directories(dir.file("videos"));
  encode_video(dir.file("videos/a.mp4"), smooth_clip(5, 13, 17, 1));
  encode_video(dir.file("videos/b.webm"), smooth_clip(5, 11, 9, 2));
  encode_video(dir.file("videos/c.gif"), smooth_clip(5, 8, 8, 3));
  write_bytes(dir.file("videos/d.mp4"), std::string(2000, 'x'));
  for (const char* c : {"a", "b", "c", "d"}) std::ofstream(dir.file(cat("videos/", c, ".txt"))) << "clip " << c;
  const std::string toml = dir.file("data.toml");
  std::ofstream(toml) << "[general]\nresolution = [8, 8]\nbatch_size = 2\n[[datasets]]\nvideo_directory = \"videos\"\n"
                         "target_frames = 2\nframe_extraction = \"slide\"\nframe_stride = 2\n";
  return toml;
}

TEST(DataTrain, VideoFolderTrainsAndResumesBitIdentically) {
  TempDir dir;
  const std::string toml = make_dataset(dir);
  const std::string common =
      " --model tiny --data " + toml + " --save-every 2 --warmup 1 --lr-scheduler constant_with_warmup";
  const CliResult full = run_cli("train" + common + " --steps 4 --out " + dir.file("a"));
  ASSERT_EQ(full.code, 0) << full.output;
  EXPECT_NE(full.output.find("skipping bad data: cannot open video '" + dir.file("videos/d.mp4")), std::string::npos)
      << full.output;
  // Relative paths, then a resume from another directory: the run stored them made absolute.
  const CliResult half = run_cli(
      "train --model tiny --data data.toml --save-every 2 --warmup 1 --lr-scheduler constant_with_warmup --steps 2 "
      "--out b",
      dir.path.string());
  ASSERT_EQ(half.code, 0) << half.output;
  const CliResult resumed = run_cli("train --resume " + dir.file("b") + " --steps 4", "/");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_bytes(dir.file(cat("a/step-00000004/", f))), read_bytes(dir.file(cat("b/step-00000004/", f)))) << f;
  const auto opts = nlohmann::json::parse(read_bytes(dir.file("a/latest/trainer.json")));
  const auto& o = opts.contains("options") ? opts["options"] : opts;
  EXPECT_EQ(o["frames"], 2);  // from the TOML
  EXPECT_EQ(o["height"], 8);
  EXPECT_EQ(o["batch_size"], 0);  // each entry's batch_size ([general]: 2)
  EXPECT_EQ(o["on_bad_data"], "skip");

  const CliResult fatal = run_cli("train" + common + " --steps 1 --on-bad-data fatal --out " + dir.file("c"));
  EXPECT_NE(fatal.code, 0);
  EXPECT_NE(fatal.output.find("d.mp4"), std::string::npos) << fatal.output;
  EXPECT_NE(fatal.output.find("--on-bad-data fatal"), std::string::npos) << fatal.output;
  const CliResult clash = run_cli("train" + common + " --steps 1 --frames 3 --out " + dir.file("e"));
  EXPECT_NE(clash.code, 0);
  EXPECT_NE(clash.output.find("no clip has the requested size (--frames 3"), std::string::npos) << clash.output;
  // Every metrics row names its step's latent shape and token count.
  std::istringstream rows(read_bytes(dir.file("a/metrics.jsonl")));
  int n = 0;
  for (std::string line; std::getline(rows, line); ++n) {
    const auto row = nlohmann::json::parse(line);
    EXPECT_EQ(row["shape"], nlohmann::json({2, 8, 8})) << line;
    EXPECT_EQ(row["tokens"], 2 * 2 * 4 * 4) << line;  // B 2, patch (1, 2, 2)
  }
  EXPECT_EQ(n, 4);
}

// A copy of the musubi-tuner Wan cache fixture (tests/data/musubi: buckets 1x6x8, 2x4x6 and 3x6x8 latents, one
// clip without its text file) in dir/cache, a TOML naming it with `general` keys, and a small model with Wan's
// latent and text widths in dir/config.json.
void musubi_setup(const TempDir& dir, const std::string& general) {
  std::filesystem::copy(std::filesystem::path(MEGASLIDE_TEST_DATA) / "musubi" / "cache", dir.file("cache"));
  std::ofstream(dir.file("data.toml")) << "[general]\n" << general << "[[datasets]]\ncache_directory = \"cache\"\n";
  ModelConfig c;
  c.dim = 16, c.ffn_dim = 24, c.num_heads = 2, c.num_layers = 4, c.freq_dim = 8;
  c.in_dim = c.out_dim = 16, c.text_dim = 4096, c.text_len = 8;
  c.patch_size = {1, 2, 2};
  c.validate();
  std::ofstream(dir.file("config.json")) << config_to_json(c).dump();
}

// musubi-tuner's Wan cache trains as it is, one bucket chosen by the latent size, and resumes bit-identically.
TEST(DataTrain, MusubiCacheTrainsAndResumesBitIdentically) {
  TempDir dir;
  musubi_setup(dir, "batch_size = 2\n");
  const std::string common =
      " --model tiny --config " + dir.file("config.json") + " --data " + dir.file("data.toml") +
      " --frames 3 --height 6 --width 8 --save-every 2 --warmup 1 --lr-scheduler constant_with_warmup";
  const CliResult full = run_cli("train" + common + " --steps 4 --out " + dir.file("a"));
  ASSERT_EQ(full.code, 0) << full.output;
  EXPECT_NE(full.output.find("orphan_wan_te.safetensors"), std::string::npos) << full.output;
  const CliResult half = run_cli("train" + common + " --steps 2 --out " + dir.file("b"));
  ASSERT_EQ(half.code, 0) << half.output;
  const CliResult resumed = run_cli("train --resume " + dir.file("b") + " --steps 4");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_bytes(dir.file(cat("a/step-00000004/", f))), read_bytes(dir.file(cat("b/step-00000004/", f)))) << f;
}

// Every bucket of the cache in one run: batches of one latent shape each, of 1 or 2 clips; streamed (with host
// checkpoints) bit for bit as resident; a run resumed at any step draws what the uninterrupted one drew.
TEST(DataTrain, BucketsStreamAsResidentAndResumeBitIdentically) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "batch_size = 2\n");
  auto options = [&](const std::string& out, int64_t steps) {
    TrainOptions o = baseline_job();
    o.model = "tiny";
    o.config = dir.file("config.json");
    o.data = dir.file("data.toml");
    o.frames = o.height = o.width = o.batch_size = 0;  // the data's own
    o.steps = steps;
    o.save_every = 3;
    o.warmup = 1;
    o.out = dir.file(out);
    return o;
  };
  train(options("resident", 7));  // 7 steps: an epoch is 4 batches (2 + 1 clips of 3x6x8, 1 of 1x6x8, 1 of 2x4x6)
  TrainOptions streamed = options("streamed", 7);
  streamed.runtime.offload = Offload::stream;
  streamed.runtime.offload_activations = true;
  train(streamed);
  train(options("resumed", 3));
  resume(dir.file("resumed"), 7);
  for (const char* run : {"streamed", "resumed"})
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(read_bytes(dir.file(cat("resident/latest/", f))), read_bytes(dir.file(cat(run, "/latest/", f))))
          << run << " " << f;
  std::set<std::string> shapes;
  std::set<int64_t> tokens;
  std::istringstream rows(read_bytes(dir.file("resident/metrics.jsonl")));
  for (std::string line; std::getline(rows, line);) {
    const auto row = nlohmann::json::parse(line);
    shapes.insert(row["shape"].dump());
    tokens.insert(row["tokens"].get<int64_t>());
  }
  EXPECT_EQ(shapes, (std::set<std::string>{"[1,6,8]", "[2,4,6]", "[3,6,8]"}));
  EXPECT_EQ(tokens, (std::set<int64_t>{12, 12, 36, 72}));  // 1x3x4, 2x2x3, 3x3x4 and two clips of it
  // `sample` draws at the largest bucket's shape.
  const auto trainer = nlohmann::json::parse(read_bytes(dir.file("resumed/latest/trainer.json")));
  EXPECT_EQ(trainer["sample_shape"], nlohmann::json({3, 6, 8}));
}

// --save-every-epochs at each epoch's last batch (an epoch of the cache is 4 batches at batch_size 2), --keep-last
// keeping the newest checkpoints, and the errors of options the data cannot take.
TEST(DataTrain, EpochCheckpointsAndKeepLast) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "batch_size = 2\n");
  TrainOptions o = baseline_job();
  o.model = "tiny", o.config = dir.file("config.json"), o.data = dir.file("data.toml");
  o.frames = o.height = o.width = o.batch_size = 0;
  o.steps = 9, o.save_every = 0, o.save_every_epochs = 1, o.out = dir.file("epochs");
  train(o);
  std::set<std::string> steps;
  for (const auto& e : std::filesystem::directory_iterator(o.out))
    if (e.path().filename().string().starts_with("step-")) steps.insert(e.path().filename().string());
  EXPECT_EQ(steps, (std::set<std::string>{"step-00000004", "step-00000008", "step-00000009"}));
  o.save_every = 1, o.save_every_epochs = 0, o.keep_last = 2, o.out = dir.file("kept");
  train(o);
  steps.clear();
  for (const auto& e : std::filesystem::directory_iterator(o.out))
    if (e.path().filename().string().starts_with("step-")) steps.insert(e.path().filename().string());
  EXPECT_EQ(steps, (std::set<std::string>{"step-00000008", "step-00000009"}));
  EXPECT_EQ(std::filesystem::read_symlink(dir.file("kept/latest")).string(), "step-00000009");
  TrainOptions synthetic = small_run(dir.file("synthetic"), 2);
  synthetic.save_every_epochs = 1;
  EXPECT_NE(error_of([&] { train(synthetic); }).find("--save-every-epochs needs data with epochs"), std::string::npos);
  o.out = dir.file("dropout"), o.caption_dropout = 0.5;
  EXPECT_NE(error_of([&] { train(o); }).find("needs --empty-prompt FILE"), std::string::npos);
  synthetic.save_every_epochs = 0, synthetic.empty_prompt = dir.file("cache/wide_wan_te.safetensors");
  EXPECT_NE(error_of([&] { train(synthetic); }).find("--empty-prompt is for cached text embeddings"),
            std::string::npos);
}

// --caption-dropout: about p of the clips carry the empty prompt's embedding, the others their own; the draws are
// a pure function of the seed.
TEST(DataTrain, CaptionDropoutUsesTheEmptyPrompt) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "");
  TrainOptions o;
  o.config = dir.file("config.json"), o.data = dir.file("data.toml");
  o.frames = o.height = o.width = o.batch_size = 0;
  o.caption_dropout = 0.3, o.empty_prompt = dir.file("cache/wide_wan_te.safetensors");
  const ModelConfig c = load_config(o.config);
  std::unique_ptr<Dataset> data = open_training_data(o, c);
  const StepShapes shapes = step_shapes(*data, c);
  const CaptionDropout dropout = caption_dropout(o, *data, c);
  ASSERT_EQ(dropout.empty.size(), size_t(2 * 4096));  // wide's embedding: 2 rows
  BatchMaker maker(c, shapes, *data, o.flow, dropout, {}, nullptr);
  Batch batch;
  maker.allocate(batch);
  Rng rng(5);
  int empty = 0, n = 0;
  for (int64_t position = 0; n < 400;) {
    position += maker.make(batch, position, rng);
    for (int64_t b = 0; b < batch.dims.B; ++b, ++n) {
      const float* ctx = batch.context.data() + b * c.text_len * c.text_dim;
      empty += std::equal(dropout.empty.begin(), dropout.empty.end(), ctx) &&
               std::all_of(ctx + dropout.empty.size(), ctx + c.text_len * c.text_dim, [](float v) { return v == 0; });
    }
  }
  EXPECT_NEAR(double(empty) / n, 0.3 + 0.7 / 4, 0.07);  // wide's own clip (1 of 4) also has that embedding
}

// --i2v-ratio on a TI2V model (Wan2.2's TI2V-5B, as DiffSynth-Studio trains it): an image-to-video step keeps each
// clip's first latent frame clean in x_t, gives its tokens t = 0 and every later frame the clip's t (one timestep
// row per latent frame), and marks the frame for the loss to leave out; about `ratio` of the steps are such steps,
// and the others are text-to-video steps with one t per clip. A T2V model refuses the option.
TEST(DataTrain, Ti2vImageToVideoStepsKeepTheFirstFrameClean) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "batch_size = 2\n");
  ModelConfig c = load_config(dir.file("config.json"));
  TrainOptions o;
  o.config = dir.file("config.json"), o.data = dir.file("data.toml");
  o.frames = o.height = o.width = o.batch_size = 0;
  o.i2v_ratio = 0.5;
  EXPECT_NE(error_of([&] { i2v_steps(o, c); }).find("--i2v-ratio is for TI2V models"), std::string::npos);
  c.model_type = "ti2v";
  ASSERT_TRUE(i2v_steps(o, c));
  std::unique_ptr<Dataset> data = open_training_data(o, c);
  const StepShapes shapes = step_shapes(*data, c, 1, true);
  BatchMaker maker(c, shapes, *data, o.flow, {}, {}, nullptr, o.i2v_ratio);
  Batch batch;
  maker.allocate(batch);
  Rng rng(9);
  int i2v = 0, multi_frame = 0;
  for (int64_t position = 0, steps = 0; steps < 200; ++steps) {
    position += maker.make(batch, position, rng);
    const ModelDims& d = batch.dims;
    ASSERT_TRUE(shapes.fits(d));
    const int64_t run = d.F * d.H * d.W, plane = d.H * d.W, clip = c.in_dim * run;
    multi_frame += d.F > 1;  // a lone latent frame trains text to video
    if (d.cond_frames == 0) {
      ASSERT_EQ(d.time_rows, 1);
      continue;
    }
    ++i2v;
    ASSERT_EQ(d.cond_frames, 1);
    ASSERT_EQ(d.time_rows, d.F);  // patch 1 in time: a token frame per latent frame
    for (int64_t b = 0; b < d.B; ++b) {
      const float* t = batch.timesteps.data() + b * d.F;
      EXPECT_EQ(t[0], 0.0f);
      for (int64_t r = 1; r < d.F; ++r) EXPECT_EQ(t[r], t[1]);
      ASSERT_GT(t[1], 0.0f);
      const double s = double(t[1]) / 1000.0;
      for (int64_t ch = 0; ch < c.in_dim; ++ch)
        for (int64_t i = 0; i < run; ++i) {
          const size_t at = size_t(b * clip + ch * run + i);
          const double x0 = batch.x0[at], noise = (double(batch.target[at]) + x0);  // target = noise - x0
          const double want = i < plane ? x0 : (1 - s) * x0 + s * noise;
          ASSERT_NEAR(batch.xt[at], want, 1e-5 * (1 + std::fabs(want))) << "clip " << b << " channel " << ch;
        }
    }
  }
  ASSERT_GT(multi_frame, 50);
  EXPECT_NEAR(double(i2v) / multi_frame, 0.5, 0.12);
}

// TI2V image-to-video steps end to end: streamed (the stage runner's loss, a timestep row per frame uploaded) bit
// for bit as resident, and not the text-to-video run's weights.
TEST(DataTrain, Ti2vStepsStreamAsResident) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "batch_size = 2\n");
  ModelConfig c = load_config(dir.file("config.json"));
  c.model_type = "ti2v";
  std::ofstream(dir.file("ti2v.json")) << config_to_json(c).dump();
  auto options = [&](const std::string& out, double ratio) {
    TrainOptions o = baseline_job();
    o.model = "tiny";
    o.config = dir.file("ti2v.json");
    o.data = dir.file("data.toml");
    o.frames = o.height = o.width = o.batch_size = 0;
    o.steps = 5;
    o.save_every = 5;
    o.warmup = 1;
    o.i2v_ratio = ratio;
    o.out = dir.file(out);
    return o;
  };
  train(options("resident", 1));
  TrainOptions streamed = options("streamed", 1);
  streamed.runtime.offload = Offload::stream;
  train(streamed);
  train(options("t2v", 0));
  const std::string model = read_bytes(dir.file("resident/latest/model.safetensors"));
  EXPECT_EQ(read_bytes(dir.file("streamed/latest/model.safetensors")), model);
  EXPECT_NE(read_bytes(dir.file("t2v/latest/model.safetensors")), model);
  EXPECT_NE(read_bytes(dir.file("resident/latest/trainer.json")).find("\"i2v_ratio\": 1"), std::string::npos);
}

}  // namespace
}  // namespace ms::test

namespace ms::test {
namespace {

// A distributed run's data (docs/distributed.md): over the cache's buckets at a global batch of 3 (so that short
// last batches leave some ranks one clip and some none), rank r's part of each batch holds the global batch's clips
// r, r + 3, ... with the timesteps, noise and context one process draws for them, and every rank's generator ends
// where one process's does; the ranks' weights are their shares of the clips.
TEST(DataTrain, RanksSplitTheGlobalBatchAsOneProcessDrawsIt) {
  QuietLogs quiet;
  TempDir dir;
  musubi_setup(dir, "");
  const int N = 3;
  TrainOptions o;
  o.config = dir.file("config.json"), o.data = dir.file("data.toml");
  o.frames = o.height = o.width = 0;
  o.caption_dropout = 0.2, o.empty_prompt = dir.file("cache/wide_wan_te.safetensors");
  const ModelConfig c = load_config(o.config);
  TrainOptions one_opts = o, rank_opts = o;
  one_opts.batch_size = N, rank_opts.batch_size = 1;
  std::unique_ptr<Dataset> one_data = open_training_data(one_opts, c, 1);
  std::vector<std::unique_ptr<Dataset>> rank_data;
  for (int r = 0; r < N; ++r) rank_data.push_back(open_training_data(rank_opts, c, N));
  const CaptionDropout dropout = caption_dropout(o, *one_data, c);
  BatchMaker one(c, step_shapes(*one_data, c), *one_data, o.flow, dropout, {}, nullptr);
  std::vector<std::unique_ptr<BatchMaker>> ranks;
  for (int r = 0; r < N; ++r)
    ranks.push_back(std::make_unique<BatchMaker>(c, step_shapes(*rank_data[size_t(r)], c, N), *rank_data[size_t(r)],
                                                 o.flow, dropout, TrainHooks{}, nullptr));
  Batch whole, part;
  one.allocate(whole);
  ranks[0]->allocate(part);
  Rng rng(11);
  int short_batches = 0, idle_ranks = 0;
  for (int64_t position = 0; position < 40;) {
    const Rng before = rng;
    const int64_t clips = one.make(whole, position, rng);
    const ModelDims& d = whole.dims;
    const int64_t clip = c.in_dim * d.F * d.H * d.W, ctx = c.text_len * c.text_dim;
    const std::vector<float> w = rank_weights(clips, N);
    short_batches += clips % N != 0;
    double total = 0;
    for (int r = 0; r < N; ++r) {
      Rng mine = before;
      ASSERT_EQ(ranks[size_t(r)]->make(part, position, mine, r, N), clips);
      EXPECT_EQ(mine.state(), rng.state()) << "rank " << r << " at " << position;
      const int64_t k = rank_clips(clips, r, N);
      EXPECT_EQ(w[size_t(r)], float(double(k) / double(clips)));
      total += w[size_t(r)];
      idle_ranks += k == 0;
      EXPECT_EQ(part.dims.B, std::max<int64_t>(1, k));
      for (int64_t b = 0; b < k; ++b) {
        const int64_t j = r + b * N;  // the clip of the whole batch
        EXPECT_EQ(part.timesteps[size_t(b)], whole.timesteps[size_t(j)]);
        EXPECT_TRUE(
            std::equal(part.xt.begin() + b * clip, part.xt.begin() + (b + 1) * clip, whole.xt.begin() + j * clip));
        EXPECT_TRUE(std::equal(part.target.begin() + b * clip, part.target.begin() + (b + 1) * clip,
                               whole.target.begin() + j * clip));
        EXPECT_TRUE(std::equal(part.context.begin() + b * ctx, part.context.begin() + (b + 1) * ctx,
                               whole.context.begin() + j * ctx));
      }
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
    position += clips;
  }
  EXPECT_GT(short_batches, 0);  // the buckets' last batches
  EXPECT_GT(idle_ranks, 0);     // a batch of 1 or 2 clips leaves a rank without one
}

}  // namespace
}  // namespace ms::test
