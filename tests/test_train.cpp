#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "train/trainer.h"
#include "train_util.h"

namespace ms::test {
namespace {

// A few seconds of training: 3 frames of 16x16 (L = 192 tokens per clip).
TrainOptions short_run(const std::string& out, int64_t steps) { return small_run(out, steps, 3, 16, 7); }

std::string bytes_of(const std::string& path) { return read_file(path); }

}  // namespace

TEST(Train, ResumeIsBitIdenticalToAnUninterruptedRun) {
  QuietLogs quiet;
  TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b");
  train(short_run(a, 4));
  train(short_run(b, 2));
  resume(b, 4);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(bytes_of(a + "/step-00000004/" + f), bytes_of(b + "/step-00000004/" + f)) << f;
  auto ta = nlohmann::json::parse(bytes_of(a + "/latest/trainer.json"));
  auto tb = nlohmann::json::parse(bytes_of(b + "/latest/trainer.json"));
  EXPECT_EQ(ta["rng_state"], tb["rng_state"]);
  EXPECT_EQ(ta["data_position"], tb["data_position"]);
  // metrics: one line per step, steps 1..4 in order, also in the resumed run
  std::ifstream m(b + "/metrics.jsonl");
  std::string line;
  int64_t expect = 1;
  while (std::getline(m, line)) EXPECT_EQ(nlohmann::json::parse(line)["step"].get<int64_t>(), expect++);
  EXPECT_EQ(expect, 5);
}

// The metrics.jsonl rows of a run.
std::vector<nlohmann::json> metrics_of(const std::string& run) {
  std::vector<nlohmann::json> rows;
  std::ifstream m(run + "/metrics.jsonl");
  for (std::string line; std::getline(m, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// --grad-accum 2 with batches of 2 trains as batches of 4 (the same clips, timesteps and noise) within fp32 rounding;
// streamed bit for bit as resident, and resumed bit for bit.
TEST(Train, GradAccumEqualsALargerBatch) {
  QuietLogs quiet;
  TempDir dir;
  auto run = [&](const std::string& name, int64_t batch, int64_t accum, int64_t steps) {
    TrainOptions o = short_run(dir.file(name), steps);
    o.batch_size = batch, o.grad_accum = accum, o.grad_clip = 0;
    return o;
  };
  train(run("big", 4, 1, 3));
  train(run("accum", 2, 2, 3));
  TrainOptions streamed = run("streamed", 2, 2, 3);
  streamed.runtime.offload = Offload::stream;
  train(streamed);
  train(run("resumed", 2, 2, 1));
  resume(dir.file("resumed"), 3);
  const auto big = metrics_of(dir.file("big")), accum = metrics_of(dir.file("accum"));
  ASSERT_EQ(big.size(), 3u);
  ASSERT_EQ(accum.size(), 3u);
  for (const char* key : {"loss", "grad_norm"}) {  // step 1: the same weights
    const double a = big[0][key].get<double>(), b = accum[0][key].get<double>();
    EXPECT_NEAR(b, a, 1e-5 * a) << key;
  }
  EXPECT_NEAR(accum[2]["loss"].get<double>(), big[2]["loss"].get<double>(), 1e-3 * big[2]["loss"].get<double>());
  EXPECT_EQ(accum[0]["tokens"], big[0]["tokens"]);
  EXPECT_EQ(accum[0]["shape"], nlohmann::json({{3, 16, 16}, {3, 16, 16}}));  // one shape per batch
  for (const char* run_name : {"streamed", "resumed"})
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_TRUE(bytes_of(dir.file(std::string("accum/latest/") + f)) ==
                  bytes_of(dir.file(std::string(run_name) + "/latest/" + f)))
          << run_name << " " << f;
}

TEST(Train, CheckpointHoldsWanNamesAndTheStateLayout) {
  QuietLogs quiet;
  TempDir dir;
  const std::string out = dir.file("run");
  train(short_run(out, 2));
  SafetensorsFile model = SafetensorsFile::open(out + "/latest/model.safetensors");
  const TensorEntry* q = model.find("blocks.0.self_attn.q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::bf16);
  SafetensorsFile opt = SafetensorsFile::open(out + "/latest/optimizer.safetensors");
  for (const char* pool : {"master.", "exp_avg.", "exp_avg_sq."}) {
    const TensorEntry* e = opt.find(std::string(pool) + "head.head.weight");
    ASSERT_NE(e, nullptr) << pool;
    EXPECT_EQ(e->dtype, DType::f32);
  }
  // no temporary directories left behind
  for (const auto& entry : std::filesystem::directory_iterator(out))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(Train, LossFallsOnSyntheticShapes) {
  QuietLogs quiet;
  TempDir dir;
  TrainOptions o = short_run(dir.file("run"), 40);
  o.save_every = 0;
  TrainSummary s = train(o);
  EXPECT_EQ(s.steps_run, 40);
  EXPECT_LT(s.last_loss, 0.8 * s.first_loss) << s.first_loss << " -> " << s.last_loss;
}

TEST(Train, RefusesToOverwriteAnExistingRun) {
  QuietLogs quiet;
  TempDir dir;
  const std::string out = dir.file("run");
  train(short_run(out, 2));
  const std::string before = bytes_of(out + "/latest/model.safetensors");
  EXPECT_THROW(train(short_run(out, 2)), Error);
  EXPECT_EQ(bytes_of(out + "/latest/model.safetensors"), before);
}

}  // namespace ms::test
