// The streaming runtime: CPU backend semantics, and streamed training == resident training bit for bit.
#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "io/atomic_file.h"
#include "model/config.h"
#include "model/param_table.h"
#include "plan/plan.h"
#include "runtime/streamed_model.h"
#include "temp_dir.h"
#include "train/trainer.h"
#include "train_util.h"

namespace ms::test {
namespace {

void expect_same_checkpoint(const std::string& a, const std::string& b) {
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_file(a + "/latest/" + f), read_file(b + "/latest/" + f)) << f;
}

}  // namespace

TEST(CpuBackend, StreamsRunInOrderAndEventsOrderAcrossStreams) {
  CpuBackend be;
  const int a = be.create_stream("a", StreamKind::device), b = be.create_stream("b", StreamKind::host);
  std::vector<int> log;
  std::mutex m;
  auto push = [&](int v) {
    std::lock_guard<std::mutex> lock(m);
    log.push_back(v);
  };
  std::atomic<bool> release{false};
  be.launch(a, "slow", [&] {
    while (!release) std::this_thread::yield();
    push(1);
  });
  be.launch(a, "second", [&] { push(2); });
  const Event e = be.record(a);
  be.wait(b, e);
  be.launch(b, "after", [&] { push(3); });
  be.launch(b, "", [] {});
  release = true;
  be.sync_all();
  EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
}

TEST(CpuBackend, CopiesAndErrorsReachTheHost) {
  CpuBackend be(100.0);  // throttled path
  const int s = be.create_stream("s", StreamKind::device);
  std::vector<float> src{1.5f, -2.0f, 3.25f}, dst(3);
  be.copy_h2d(s, dst.data(), src.data(), 12, "copy");
  const uint16_t bf16[2] = {0x3fc0, 0xc000};  // 1.5, -2
  float wide[2];
  be.upload_weights(s, wide, bf16, 2, "weights");
  be.sync(be.record(s));
  EXPECT_EQ(dst, src);
  EXPECT_EQ(wide[0], 1.5f);
  EXPECT_EQ(wide[1], -2.0f);
  be.launch(s, "fails", [] { throw Error("boom"); });
  EXPECT_THROW(be.sync_all(), Error);
}

// After a failure the stream drops its work but still runs what launch_always enqueued (the CUDA backend's
// signals to device streams), in order.
TEST(CpuBackend, AfterAFailureOnlyAlwaysTasksRun) {
  std::vector<int> ran;
  {
    CpuBackend be;
    const int s = be.create_stream("optimizer", StreamKind::host);
    be.launch(s, "ok", [&] { ran.push_back(1); });
    be.launch(s, "fails", [] { throw Error("boom"); });
    be.launch(s, "dropped", [&] { ran.push_back(3); });
    be.launch_always(s, "signal", [&] { ran.push_back(4); });
    EXPECT_THROW(be.sync(be.record(s)), Error);
    be.launch(s, "dropped", [&] { ran.push_back(5); });
    be.launch_always(s, "signal", [&] { ran.push_back(6); });
  }  // the destructor drains the stream
  EXPECT_EQ(ran, (std::vector<int>{1, 4, 6}));
}

// The backward starts with the head and the last K - 1 blocks still in their slots whatever K is, as the plan
// counts (step_traffic), and every upload can run K - 1 uses ahead of its compute.
TEST(Streaming, SlotScheduleKeepsTheLastKStagesForTheBackward) {
  ModelConfig c = preset_config("tiny");
  c.num_layers = 5;
  const ParamTable table(c);
  const int S = int(table.stages().size());
  for (int K : {2, 3, 4, 9}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const std::vector<SlotUse> uses = slot_uses(S, K);
    ASSERT_EQ(int(uses.size()), 2 * S - 1);
    int resident = 0;
    int64_t uploaded = 0;
    std::vector<int> held(size_t(K), -1);
    for (int i = 0; i < int(uses.size()); ++i) {
      const SlotUse& u = uses[size_t(i)];
      EXPECT_EQ(u.stage, i < S ? i : 2 * S - 2 - i);
      ASSERT_TRUE(u.slot >= 0 && u.slot < K);
      if (u.resident) {
        EXPECT_EQ(held[size_t(u.slot)], u.stage);  // really still there
        ++resident;
      } else {
        uploaded += table.stages()[size_t(u.stage)].numel;
        EXPECT_LE(u.previous, i - std::min(K, i + 1));  // the slot's last user is K uses back (or none)
      }
      held[size_t(u.slot)] = u.stage;
    }
    EXPECT_EQ(resident, std::min(K, S) - 1);
    ArenaOptions ao;
    ao.prefetch = K;
    EXPECT_EQ(uploaded * 2, step_traffic(table, DevicePlan{}, ao).h2d_weights);
  }
}

// small_run: 1 frame of 8x8 (16 tokens per clip), so the arena is mostly weight slots and the budget
// can be made smaller than the model's weights.
TEST(Streaming, BitIdenticalToResidentForAnyPrefetchAndBudget) {
  QuietLogs quiet;
  TempDir dir;
  ModelConfig deep = preset_config("tiny");  // 10 blocks: the arena's slots hold a fraction of the weights
  deep.num_layers = 10;
  std::filesystem::create_directories(dir.file("model"));
  write_file_atomic(dir.file("model/config.json"), config_to_json(deep).dump());
  auto run = [&](const std::string& name, const std::string& schedule) {
    TrainOptions o = small_run(dir.file(name + "-" + schedule), 4);
    o.model = dir.file("model");
    o.runtime.optimizer_schedule = parse_name<ScheduleChoice>(schedule, "test");
    o.grad_clip = 0.05;  // small enough to clip: the clipping path is part of the comparison
    return o;
  };
  const int64_t weights_f32 = ParamTable(deep).total() * 4;
  for (const std::string schedule : {"deferred", "immediate"}) {
    const TrainOptions resident = run("resident", schedule);
    train(resident);
    for (int k : {2, 3, 6}) {
      TrainOptions o = run(cat("k", k), schedule);
      o.runtime.offload = Offload::stream;
      o.runtime.prefetch = k;
      if (k == 2) o.runtime.device_memory = weights_f32 * 9 / 10;  // a budget smaller than the model's weights
      o.runtime.offload_activations = k == 3;                      // checkpoints through host memory
      train(o);
      expect_same_checkpoint(resident.out, o.out);
      auto summary = nlohmann::json::parse(read_file(o.out + "/summary.json"));
      ArenaOptions ao;
      ao.prefetch = k;
      EXPECT_EQ(summary["h2d_weight_bytes_per_step"].get<int64_t>(),
                step_traffic(ParamTable(deep), DevicePlan{}, ao).h2d_weights);
      if (k == 2) {
        EXPECT_LT(summary["device_arena_bytes"].get<int64_t>(), weights_f32);  // holds less than the model
      }
    }
  }
  // the immediate schedule keeps two stage-sized gradient buffers instead of a full pool
  auto host_bytes = [&](const std::string& name) {
    return nlohmann::json::parse(read_file(dir.file(name) + "/summary.json"))["host_state_bytes"].get<int64_t>();
  };
  EXPECT_LT(host_bytes("k2-immediate"), host_bytes("k2-deferred"));
  // and the two schedules differ (clipping by the previous norm is not clipping by this one)
  EXPECT_NE(read_file(dir.file("k2-immediate") + "/latest/model.safetensors"),
            read_file(dir.file("k2-deferred") + "/latest/model.safetensors"));
}

TEST(Streaming, ResumeOfAStreamedRunIsBitIdentical) {
  QuietLogs quiet;
  TempDir dir;
  for (const char* schedule : {"deferred", "immediate"}) {
    TrainOptions a = small_run(dir.file(std::string("a-") + schedule), 4);
    TrainOptions b = small_run(dir.file(std::string("b-") + schedule), 2);
    a.runtime.offload = b.runtime.offload = Offload::stream;
    a.runtime.link_gbps = b.runtime.link_gbps = 50;
    a.runtime.optimizer_schedule = b.runtime.optimizer_schedule = parse_name<ScheduleChoice>(schedule, "test");
    a.grad_clip = b.grad_clip = 0.05;
    train(a);
    train(b);
    resume(b.out, 4);
    expect_same_checkpoint(a.out, b.out);
  }
}

TEST(Streaming, BudgetTooSmallRefusesToStartAndNamesTheMinimum) {
  QuietLogs quiet;
  TempDir dir;
  TrainOptions o = small_run(dir.file("run"), 1);
  o.runtime.offload = Offload::stream;
  o.runtime.device_memory = 1 << 20;
  try {
    train(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.out + "/latest"));
}

TEST(Streaming, TraceHasOneTrackPerStream) {
  QuietLogs quiet;
  TempDir dir;
  TrainOptions o = small_run(dir.file("run"), 2);
  o.runtime.offload = Offload::stream;
  o.trace = dir.file("trace.json");
  train(o);
  auto j = nlohmann::json::parse(read_file(o.trace));
  std::set<std::string> tracks, spans;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") spans.insert(e["name"].get<std::string>());
  }
  EXPECT_EQ(tracks, (std::set<std::string>{"compute", "h2d", "d2h", "optimizer"}));
  for (const char* s : {"weights", "grads", "block", "block backward", "head", "adamw"})
    EXPECT_TRUE(spans.count(s)) << s;
}

}  // namespace ms::test
