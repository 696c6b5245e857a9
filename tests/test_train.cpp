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
