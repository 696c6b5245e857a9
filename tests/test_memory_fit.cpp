// A training run checks its host memory before it allocates (train/memory_fit.h): refused with numbers and a fix, no
// run directory left behind; --optimizer-schedule auto picks immediate when only that fits, stores it, and resumes
// with it; the need counts what the run really allocates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/units.h"
#include "io/atomic_file.h"
#include "model/config.h"
#include "model/param_table.h"
#include "temp_dir.h"
#include "train/memory_fit.h"
#include "train/trainer.h"
#include "train_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

nlohmann::json json_file(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// The need of small_run's shape (tiny preset, 3 frames of 16 x 16, batch 2) under options o and schedule s (on the
// CPU backend, blocks recomputed unless keep).
TrainHostNeed need_of(const TrainOptions& o, OptimizerSchedule s, bool keep = false) {
  const ModelConfig c = preset_config("tiny");
  const StepShapes shapes(ModelDims::make(c, o.batch_size, o.frames, o.height, o.width, c.text_len));
  return train_host_need(o, RunSetup{.schedule = s, .keep_block_acts = keep}, c, shapes);
}

TEST(MemoryFit, ARunOverItsLimitIsRefusedWithNumbersAndNoRunDirectory) {
  TempDir dir;
  const std::string out = dir.file("run");
  const CliResult r = run_cli("train --steps 2 --host-memory 1MB --out " + out);
  EXPECT_EQ(r.code, 1) << r.output;
  for (const char* part : {"this run needs ", "of host memory (model state ", "deferred optimizer schedule",
                           "but --host-memory leaves 1.00 MB", "megaslide plan"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  EXPECT_FALSE(fs::exists(out)) << "a refused run leaves nothing";
  // With the resident schedule's need between the schedules' on a streamed run, the fix is named with its need.
  TrainOptions o = small_run(out, 2, 3, 16);
  o.runtime.offload = Offload::stream;
  const int64_t deferred = need_of(o, OptimizerSchedule::deferred).total();
  const int64_t immediate = need_of(o, OptimizerSchedule::immediate).total();
  ASSERT_LT(immediate, deferred);
  const CliResult fix =
      run_cli(cat("train --model tiny --batch-size 2 --steps 2 --frames 3 --height 16 --width 16 --offload stream "
                  "--no-final-samples ",
                  "--optimizer-schedule deferred --host-memory ", (immediate + deferred) / 2, " --out ", out));
  EXPECT_EQ(fix.code, 1) << fix.output;
  EXPECT_NE(fix.output.find(cat("--optimizer-schedule immediate needs ", format_bytes(double(immediate)), " and fits")),
            std::string::npos)
      << fix.output;
  EXPECT_FALSE(fs::exists(out));
}

// Samples while training (--sample-every) are drawn on rank 0 beside the run's own buffers, with an f32 copy of every
// weight and a forward workspace at the largest clip: a run whose samples would not fit is refused before it starts.
TEST(MemoryFit, SamplesWhileTrainingAreCountedBeforeTheRunStarts) {
  TempDir dir;
  const std::string prompts = dir.file("prompts.txt");
  std::ofstream(prompts) << "a red square moving right\n";
  TrainOptions o = small_run(dir.file("run"), 1, 3, 16);
  const int64_t plain = need_of(o, OptimizerSchedule::deferred).total();
  o.samples.every = 1;
  o.samples.prompts = prompts;
  o.samples.prompt_list = {"a red square moving right"};
  const TrainHostNeed with = need_of(o, OptimizerSchedule::deferred);
  EXPECT_GE(with.samples, 4 * ParamTable(preset_config("tiny")).total()) << "at least the f32 copy of the weights";
  TrainOptions never = o;
  never.samples.every = o.steps + 1;
  EXPECT_EQ(need_of(never, OptimizerSchedule::deferred).total(), plain) << "no sample falls due";
  EXPECT_NE(with.breakdown().find(cat("samples ", format_bytes(double(with.samples)))), std::string::npos)
      << with.breakdown();
  const std::string run =
      cat("train --model tiny --batch-size 2 --steps 1 --frames 3 --height 16 --width 16 --recompute always "
          "--no-final-samples ",
          "--optimizer-schedule deferred --host-memory ", (plain + with.total()) / 2, " --out ");
  const CliResult refused = run_cli(cat(run, dir.file("sampled"), " --sample-every 1 --sample-prompts ", prompts));
  EXPECT_EQ(refused.code, 1) << refused.output;
  for (const std::string& part :
       {cat("this run needs ", format_bytes(double(with.total()))),
        cat("the run without --sample-every, with --no-final-samples, needs ", format_bytes(double(plain)))})
    EXPECT_NE(refused.output.find(part), std::string::npos) << part << "\n" << refused.output;
  EXPECT_FALSE(fs::exists(dir.file("sampled")));
  const CliResult fits = run_cli(run + dir.file("plain"));
  EXPECT_EQ(fits.code, 0) << fits.output;
}

TEST(MemoryFit, AutoPicksImmediateWhenOnlyItFitsAndResumesWithIt) {
  QuietLogs quiet;
  TempDir dir;
  TrainOptions o = small_run(dir.file("run"), 2, 3, 16);
  o.runtime.offload = Offload::stream;
  const int64_t deferred = need_of(o, OptimizerSchedule::deferred).total();
  const int64_t immediate = need_of(o, OptimizerSchedule::immediate).total();
  o.runtime.host_memory = (immediate + deferred) / 2;
  ASSERT_EQ(o.runtime.optimizer_schedule, ScheduleChoice::automatic);  // the default
  const TrainSummary s = train(o);
  EXPECT_EQ(s.steps_run, 2);
  EXPECT_TRUE(std::isfinite(s.last_loss));
  EXPECT_EQ(json_file(o.out + "/latest/trainer.json")["options"]["optimizer_schedule"], "immediate");
  // Resumed with no limit given, the run keeps the schedule it was started with.
  resume(o.out, 3);
  EXPECT_EQ(json_file(o.out + "/latest/trainer.json")["options"]["optimizer_schedule"], "immediate");
  // Resumed under a limit it does not fit, the fix is a new run from the checkpoint: its options are kept.
  try {
    resume(o.out, 4, {}, immediate / 2);
    ADD_FAILURE() << "a resumed run over its limit was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cat("but --host-memory leaves ", format_bytes(double(immediate / 2)),
                                             ". A resumed run keeps its saved options: free host memory, or start a ",
                                             "new run from its checkpoint (--model ", o.out, "/latest) with ")),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(json_file(o.out + "/latest/trainer.json")["step"], 3) << "nothing lost";
  // With room for the deferred schedule, auto keeps it.
  TrainOptions roomy = small_run(dir.file("roomy"), 1, 3, 16);
  roomy.runtime.offload = Offload::stream;
  roomy.runtime.host_memory = deferred;
  train(roomy);
  EXPECT_EQ(json_file(roomy.out + "/latest/trainer.json")["options"]["optimizer_schedule"], "deferred");
}

TEST(MemoryFit, SampleChecksBeforeItLoads) {
  TempDir dir;
  const std::string out = dir.file("clip.gif");
  const CliResult r = run_cli(
      "sample --model tiny --prompt hello --frames 5 --height 16 --width 16 --host-memory 2MB "
      "--out " +
      out);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("sampling preset tiny needs "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("but --host-memory leaves 2.00 MB. Sample fewer frames"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Euler steps"), std::string::npos) << "refused before it loads the model";
  EXPECT_FALSE(fs::exists(out));
  const CliResult ok = run_cli(
      "sample --model tiny --prompt hello --frames 5 --height 16 --width 16 --steps 2 "
      "--host-memory 1GB --out " +
      out);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(out));
}

// The need is what the run allocates: its host pools (summary.json's host_state_bytes) and, on the CPU backend,
// the arena or the resident weights and workspace (device_arena_bytes).
TEST(MemoryFit, NeedIsWhatTheRunAllocates) {
  QuietLogs quiet;
  TempDir dir;
  int runs = 0;
  for (Offload offload : {Offload::none, Offload::stream})
    for (ScheduleChoice schedule : {ScheduleChoice::deferred, ScheduleChoice::immediate})
      for (int64_t accum : {1, 2}) {
        if (accum > 1 && schedule == ScheduleChoice::immediate) continue;
        TrainOptions o = small_run(dir.file(cat("r", runs++)), 1, 3, 16);
        o.runtime.offload = offload;
        o.runtime.optimizer_schedule = schedule;
        o.grad_accum = accum;
        o.runtime.offload_activations = offload == Offload::stream && accum == 1;
        RunSetup resolved;  // as train resolves --recompute auto (here: activations kept when resident)
        const ModelConfig c = preset_config("tiny");
        fit_host_memory(o, resolved, c, StepShapes(ModelDims::make(c, 2, 3, 16, 16, c.text_len)));
        EXPECT_EQ(resolved.keep_block_acts, offload == Offload::none);
        const TrainHostNeed n = need_of(o, resolved.schedule, resolved.keep_block_acts);
        train(o);
        const nlohmann::json summary = json_file(o.out + "/summary.json");
        const std::string what = cat(name_of(offload), " ", name_of(schedule), " accum ", accum);
        const int64_t P = ParamTable(preset_config("tiny")).total();
        EXPECT_EQ(n.pools.persistent(), 14 * P) << what;
        const int64_t resident_grads = offload == Offload::none && (accum > 1 || schedule == ScheduleChoice::immediate)
                                           ? 4 * P  // the resident backward's own pool, counted with the gradients
                                           : 0;
        EXPECT_EQ(summary["host_state_bytes"].get<int64_t>() + resident_grads + n.pools.activations, n.pools.total())
            << what;
        EXPECT_EQ(summary["device_arena_bytes"].get<int64_t>(), n.compute) << what;
        EXPECT_EQ(n.pools.activations > 0, o.runtime.offload_activations) << what;
      }
}

}  // namespace
}  // namespace ms::test

namespace ms::test {
namespace {

// --recompute never keeps every block's activations from the forward: the same bits as recomputing them, for dense
// and DSA attention, and auto keeps them only where they fit.
TEST(Recompute, KeptActivationsGiveTheSameBitsAsRecomputing) {
  QuietLogs quiet;
  TempDir dir;
  ModelConfig dsa = preset_config("tiny");
  dsa.attention.type = AttentionType::dsa;
  dsa.attention.window = {3, 3, 3};
  dsa.attention.offset_range = {1.0, 2.0, 2.0};
  std::ofstream(dir.file("dsa.json")) << config_to_json(dsa).dump();
  for (const std::string& config : {std::string(), dir.file("dsa.json")}) {
    std::vector<std::string> bytes;
    for (Recompute r : {Recompute::always, Recompute::never}) {
      TrainOptions o = small_run(dir.file(cat("r", bytes.size(), config.empty() ? "dense" : "dsa")), 2, 3, 16);
      o.config = config;
      o.runtime.recompute = r;
      train(o);
      bytes.push_back(read_file(o.out + "/latest/model.safetensors") +
                      read_file(o.out + "/latest/optimizer.safetensors"));
    }
    EXPECT_EQ(bytes[0], bytes[1]) << (config.empty() ? "dense" : "dsa");
  }
  // auto: kept where they fit, recomputed where only the recompute fits.
  TrainOptions o = small_run(dir.file("auto"), 1, 3, 16);
  const ModelConfig c = preset_config("tiny");
  const StepShapes shapes(ModelDims::make(c, o.batch_size, o.frames, o.height, o.width, c.text_len));
  const int64_t with = need_of(o, OptimizerSchedule::deferred, true).total();
  const int64_t without = need_of(o, OptimizerSchedule::deferred).total();
  ASSERT_GT(with, without);
  for (auto [limit, keep] : {std::pair{with, true}, {(with + without) / 2, false}}) {
    TrainOptions v = o;
    v.runtime.optimizer_schedule = ScheduleChoice::deferred;
    v.runtime.host_memory = limit;
    RunSetup r;
    fit_host_memory(v, r, c, shapes);
    EXPECT_EQ(r.keep_block_acts, keep) << limit;
  }
  const CliResult never = run_cli("train --offload stream --recompute never --out " + dir.file("never"));
  EXPECT_EQ(never.code, 1) << never.output;
  EXPECT_NE(never.output.find("--recompute never keeps every block's activations, which a streamed run cannot"),
            std::string::npos)
      << never.output;
}

}  // namespace
}  // namespace ms::test
