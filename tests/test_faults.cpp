// Faults during training: non-finite gradients, activations or data skip the step without touching the
// state (or stop the run, saying where, with --on-nonfinite stop); SIGINT checkpoints the last finished
// step and exits 130.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli_util.h"
#include "core/log.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/param_table.h"
#include "runtime/host_state.h"
#include "temp_dir.h"
#include "train/trainer.h"
#include "train_util.h"

namespace ms::test {
namespace {

int64_t count_lines(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  int64_t n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}

}  // namespace

TEST(Faults, NanGradientsSkipTheStepAndLeaveTheStateUntouched) {
  QuietLogs quiet;
  for (const char* offload : {"none", "stream"}) {
    TempDir dir;
    TrainOptions o = small_run(dir.file("run"), 3);
    o.save_every = 1;
    o.runtime.offload = parse_name<Offload>(offload, "test");
    TrainSummary s = train(o, {.inject_nan_grad = 2});
    EXPECT_EQ(s.skipped, 1) << offload;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(read_file(o.out + "/step-00000001/" + f), read_file(o.out + "/step-00000002/" + f)) << offload << f;
    EXPECT_NE(read_file(o.out + "/step-00000002/model.safetensors"),
              read_file(o.out + "/step-00000003/model.safetensors"));
    std::ifstream m(o.out + "/metrics.jsonl");
    std::string line;
    for (int step = 1; std::getline(m, line); ++step)
      EXPECT_EQ(nlohmann::json::parse(line)["skipped"].get<bool>(), step == 2) << offload << " step " << step;
  }
}

namespace {

// A NaN in block 1's forward output (tiny has 3 blocks; the aid poisons block num_layers/2) or an Inf in
// one clip of the batch, at a random step of 2..3 (batch 2, so step p reads data samples 2p-2 and 2p-1).
struct NonFinite {
  int64_t step;
  std::string flag, where;  // the testing aid; what the message must name
};

std::vector<NonFinite> random_faults(std::mt19937_64& rng) {
  const int64_t p = std::uniform_int_distribution<int64_t>(2, 3)(rng), b = int64_t(rng() % 2);
  const std::string sample = std::to_string(2 * p - 2 + b);
  return {
      {p, "--inject-nan-activation " + std::to_string(p), "the forward output of block 1 has 1 of "},
      {p, "--inject-inf-data " + sample, "clip " + std::to_string(b) + " of the batch (data sample " + sample + ")"}};
}

// `megaslide train` on 1x8x8 clips for 4 steps with a checkpoint after every step.
CliResult train_4_steps(const std::string& out, const std::string& flags) {
  return run_cli("train --model tiny --batch-size 2 --frames 1 --height 8 --width 8 --steps 4 --save-every 1 --out " +
                 out + " " + flags);
}

std::string checkpoint_file(const std::string& out, int64_t step, const char* name) {
  char dir[32];
  std::snprintf(dir, sizeof dir, "/step-%08lld/", static_cast<long long>(step));
  return out + dir + name;
}

}  // namespace

TEST(Faults, NonFiniteActivationsOrDataSkipTheStepAndSayWhere) {
  std::mt19937_64 rng(5);
  for (const char* runtime : {"--offload none", "--offload stream", "--offload stream --optimizer-schedule immediate"})
    for (const NonFinite& f : random_faults(rng)) {
      TempDir dir;
      const std::string out = dir.file("run"), what = cat(runtime, " ", f.flag);
      CliResult r = train_4_steps(out, cat(runtime, " ", f.flag));
      ASSERT_EQ(r.code, 0) << what << "\n" << r.output;
      const std::string expected = cat("step ", f.step, ": non-finite ");
      EXPECT_NE(r.output.find(expected), std::string::npos) << what << "\n" << r.output;
      EXPECT_NE(r.output.find(f.where), std::string::npos) << what << "\n" << r.output;
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        EXPECT_EQ(read_file(checkpoint_file(out, f.step - 1, file)), read_file(checkpoint_file(out, f.step, file)))
            << what << " " << file;
        EXPECT_NE(read_file(checkpoint_file(out, f.step, file)), read_file(checkpoint_file(out, f.step + 1, file)))
            << what << " " << file;
      }
      std::ifstream m(out + "/metrics.jsonl");
      std::string line;
      for (int64_t step = 1; std::getline(m, line); ++step)
        EXPECT_EQ(nlohmann::json::parse(line)["skipped"].get<bool>(), step == f.step) << what << " step " << step;
    }
}

TEST(Faults, OnNonFiniteStopExitsNamingTheStepAndWhere) {
  std::mt19937_64 rng(6);
  for (const char* runtime : {"--offload none", "--offload stream"})
    for (const NonFinite& f : random_faults(rng)) {
      TempDir dir;
      const std::string out = dir.file("run"), what = cat(runtime, " ", f.flag);
      CliResult r = train_4_steps(out, cat(runtime, " ", f.flag, " --on-nonfinite stop"));
      EXPECT_EQ(r.code, 1) << what << "\n" << r.output;
      for (const std::string& part :
           {cat("megaslide: error: step ", f.step, ": non-finite "), f.where,
            std::string("stopped (--on-nonfinite stop)"), cat(out, "/latest (step ", f.step - 1, ")")})
        EXPECT_NE(r.output.find(part), std::string::npos) << what << ": no '" << part << "' in\n" << r.output;
      auto t = nlohmann::json::parse(read_file(out + "/latest/trainer.json"));
      EXPECT_EQ(t["step"].get<int64_t>(), f.step - 1) << what;
      EXPECT_FALSE(std::filesystem::exists(checkpoint_file(out, f.step, ""))) << what;
    }
}

// A data sample that fails to load (a file that probed well at start-up but does not decode) stops the run
// with its error. The batch is made during the previous step's device work, but that step still finishes,
// is logged and checkpointed first: the error surfaces where a serial loop would raise it.
TEST(Faults, DataErrorStopsTheRunAfterTheStepBefore) {
  for (const char* runtime :
       {"--offload none", "--offload stream", "--offload stream --optimizer-schedule immediate"}) {
    TempDir dir;
    const std::string out = dir.file("run");
    CliResult r = train_4_steps(out, cat(runtime, " --inject-data-error 5"));  // batch 2: sample 5 is step 3's
    EXPECT_EQ(r.code, 1) << runtime << "\n" << r.output;
    EXPECT_NE(r.output.find("megaslide: error: data sample 5: injected data error"), std::string::npos)
        << runtime << "\n"
        << r.output;
    auto t = nlohmann::json::parse(read_file(out + "/latest/trainer.json"));
    EXPECT_EQ(t["step"].get<int64_t>(), 2) << runtime;
    EXPECT_EQ(count_lines(out + "/metrics.jsonl"), 2) << runtime;
  }
}

TEST(Faults, SigintCheckpointsTheLastStepAndExits130) {
  TempDir dir;
  const std::string out = dir.file("run");
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execl(MEGASLIDE_BINARY, "megaslide", "train", "--model", "tiny", "--steps", "100000", "--frames", "1", "--height",
          "8", "--width", "8", "--save-every", "0", "--out", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string metrics = out + "/metrics.jsonl";
  for (int i = 0; i < 600 && count_lines(metrics) < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(count_lines(metrics), 3) << "the run did not start";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  auto t = nlohmann::json::parse(read_file(out + "/latest/trainer.json"));
  const int64_t step = t["step"].get<int64_t>();
  EXPECT_EQ(step, count_lines(metrics));
  CliResult r = run_cli("train --resume " + out + " --steps " + std::to_string(step + 2));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(count_lines(metrics), step + 2);
}

}  // namespace ms::test

namespace ms::test {

TEST(Faults, ImmediateScheduleSkipsOnlyTheStageWithNonFiniteGradients) {
  QuietLogs quiet;
  for (const char* offload : {"none", "stream"}) {
    TempDir dir;
    TrainOptions o = small_run(dir.file("run"), 2);
    o.save_every = 1;
    o.runtime.offload = parse_name<Offload>(offload, "test");
    o.runtime.optimizer_schedule = ScheduleChoice::immediate;
    EXPECT_EQ(train(o, {.inject_nan_grad = 2}).skipped, 1) << offload;  // poisons the stem's gradients of step 2
    SafetensorsFile a = SafetensorsFile::open(o.out + "/step-00000001/optimizer.safetensors");
    SafetensorsFile b = SafetensorsFile::open(o.out + "/step-00000002/optimizer.safetensors");
    auto bytes = [](const SafetensorsFile& f, const std::string& name) {
      const TensorEntry* e = f.find(name);
      return std::string(reinterpret_cast<const char*>(e->data), size_t(e->nbytes));
    };
    EXPECT_EQ(bytes(a, "master.patch_embedding.weight"), bytes(b, "master.patch_embedding.weight")) << offload;
    EXPECT_EQ(bytes(a, "exp_avg.time_embedding.0.weight"), bytes(b, "exp_avg.time_embedding.0.weight")) << offload;
    EXPECT_NE(bytes(a, "master.head.head.weight"), bytes(b, "master.head.head.weight")) << offload;
  }
}

}  // namespace ms::test

namespace ms::test {

TEST(Faults, HostAllocationFailureNamesTheBytes) {
  const pid_t pid = fork();
  if (pid == 0) {  // a child with 1 GiB of address space to spare tries to hold wan2.1-1.3b's host state (25 GB)
    // Above what is mapped already (thread stacks, and in a CUDA build cuBLASLt's 0.5 GB library), which
    // /proc/self/statm gives in pages.
    unsigned long long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t room = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (1ull << 30);
    const struct rlimit limit { room, room };
    setrlimit(RLIMIT_AS, &limit);
    try {
      HostState host(ParamTable(preset_config("wan2.1-1.3b")).total(), 0);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find("out of host memory mapping 2.84 GB") != std::string::npos ? 0 : 2);
    }
    _exit(3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace ms::test
