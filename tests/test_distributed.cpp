// Distributed training (docs/distributed.md) end to end: `mpirun -np N megaslide train` on the CPU backend against one
// process with the same global batch, repeats, resumes on the same and on other rank counts, and ranks that die or
// hang. Each test skips (reported skipped) where mpirun or the MPI plugin is missing. CI runs these in its release
// step only: the sanitizers' builds do not run MPI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace ms::test {
namespace {

struct Launch {
  int code = -1;
  std::string output;
  double seconds = 0;
};

// The small run every test trains: the tiny preset on synthetic clips, streamed through the CPU backend.
const std::string kRun = "-q train --model tiny --frames 2 --height 16 --width 16 --offload stream ";

Launch shell(const std::string& cmd) {
  Launch r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// `megaslide args` as `ranks` ranks of mpirun (oversubscribed: CI has 2 cores), or as one plain process for 0.
Launch megaslide(int ranks, const std::string& args) {
  const std::string bin = MEGASLIDE_BINARY;
  if (ranks == 0) return shell(bin + " " + args);
  return shell("mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np " +
               std::to_string(ranks) + " " + bin + " " + args);
}

#define SKIP_WITHOUT_MPI()                                                                                \
  do {                                                                                                    \
    if (shell("command -v mpirun").code != 0) GTEST_SKIP() << "mpirun is not installed (tools/setup.sh)"; \
    if (!fs::exists(fs::path(MEGASLIDE_BINARY).parent_path() / "libmegaslide_mpi.so"))                    \
      GTEST_SKIP() << "this build has no MPI plugin (cmake found no MPI)";                                \
  } while (0)

// One metric of every step in the run's metrics.jsonl.
std::vector<double> metric(const std::string& run, const char* key = "loss") {
  std::vector<double> out;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line).at(key).get<double>());
  return out;
}

// The largest relative difference between two runs' metric over the steps both have.
double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(a[i]));
  return worst;
}

// The tensor `name` of the safetensors file at `path`, as f32.
std::vector<float> file_tensor(const std::string& path, const std::string& name) {
  return tensor_values(SafetensorsFile::open(path), name);
}

// Every weight of two checkpoints' model.safetensors: the largest difference, and how many bf16 values differ.
struct WeightDiff {
  double max_abs = 0;
  int64_t differing = 0, total = 0;
};
WeightDiff weight_diff(const std::string& a, const std::string& b) {
  WeightDiff d;
  SafetensorsFile fa = SafetensorsFile::open(a + "/model.safetensors");
  for (const TensorEntry& e : fa.entries()) {
    const std::vector<float> x = file_tensor(a + "/model.safetensors", e.name),
                             y = file_tensor(b + "/model.safetensors", e.name);
    EXPECT_EQ(x.size(), y.size()) << e.name;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      d.max_abs = std::max(d.max_abs, double(std::fabs(x[i] - y[i])));
      d.differing += x[i] != y[i];
      ++d.total;
    }
  }
  return d;
}

void expect_same_files(const std::string& a, const std::string& b, const std::vector<std::string>& names) {
  for (const std::string& n : names) EXPECT_EQ(read_file(a + "/" + n), read_file(b + "/" + n)) << n << " differs";
}

// Two ranks at batch 2 train as one process at batch 4: within fp32 rounding after 20 steps, the measured difference
// printed. The ranks' gradients are summed in another order than one process sums its batch's, so bit equality is
// not expected, and AdamW lets the rounding grow a little each step: measured 8e-6 of the loss and 1 % of the bf16
// weights one rounding apart after 20 steps. The gradient norm is compared too: clipping and AdamW would hide a
// gradient off by a constant factor from the loss and the weights, but not from the norm.
TEST(Distributed, TwoRanksTrainAsOneProcessWithTheGlobalBatch) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const std::string one = dir.file("one"), two = dir.file("two");
  const Launch a = megaslide(0, kRun + "--steps 20 --batch-size 4 --out " + one);
  ASSERT_EQ(a.code, 0) << a.output;
  const Launch b = megaslide(2, kRun + "--steps 20 --batch-size 2 --out " + two);
  ASSERT_EQ(b.code, 0) << b.output;
  const std::vector<double> la = metric(one), lb = metric(two);
  ASSERT_EQ(la.size(), 20u);
  ASSERT_EQ(lb.size(), 20u);
  const double loss = worst_relative(la, lb), norm = worst_relative(metric(one, "grad_norm"), metric(two, "grad_norm"));
  const WeightDiff w = weight_diff(one + "/latest", two + "/latest");
  std::printf(
      "after 20 steps: loss differs by %.3g and the gradient norm by %.3g (relative, worst step); %lld of "
      "%lld bf16 weights differ, by at most %.3g\n",
      loss, norm, static_cast<long long>(w.differing), static_cast<long long>(w.total), w.max_abs);
  EXPECT_LT(loss, 1e-4);
  EXPECT_LT(norm, 1e-3);
  EXPECT_LT(w.differing, w.total / 20);  // values rounded to the neighbouring bf16
  EXPECT_LT(w.max_abs, 1e-2);
  EXPECT_NE(la.front(), la.back());  // it trained
}

// Three ranks, every stage resident on the CPU and the immediate optimizer schedule: the other code path, and a
// global batch (3) that is not the per-rank batch times a power of two.
TEST(Distributed, ThreeRanksResidentImmediateMatchOneProcess) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const std::string common =
      "-q train --model tiny --frames 2 --height 16 --width 16 --steps 8 --optimizer-schedule immediate ";
  const Launch a = megaslide(0, common + "--batch-size 3 --out " + dir.file("one"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Launch b = megaslide(3, common + "--batch-size 1 --out " + dir.file("three"));
  ASSERT_EQ(b.code, 0) << b.output;
  const std::vector<double> la = metric(dir.file("one")), lb = metric(dir.file("three"));
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_LT(worst_relative(la, lb), 1e-4);
  EXPECT_LT(worst_relative(metric(dir.file("one"), "grad_norm"), metric(dir.file("three"), "grad_norm")), 1e-3);
}

// The ranks' gradients are summed in rank order: two runs give the same bits, the optimizer shards included. The
// model rank 0 writes from the gathered shards serves diffusers too (--save-format diffusers: read back from it).
TEST(Distributed, RepeatedRunsAreBitIdentical) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  for (const char* run : {"a", "b"}) {
    const Launch r = megaslide(2, kRun + "--steps 6 --save-format diffusers --out " + dir.file(run));
    ASSERT_EQ(r.code, 0) << r.output;
  }
  expect_same_files(dir.file("a/latest"), dir.file("b/latest"),
                    {"model.safetensors", "optimizer-rank0-of-2.safetensors", "optimizer-rank1-of-2.safetensors",
                     "transformer/diffusion_pytorch_model.safetensors", "config.json"});
  EXPECT_EQ(file_tensor(dir.file("a/latest/model.safetensors"), "head.head.weight"),
            file_tensor(dir.file("a/latest/transformer/diffusion_pytorch_model.safetensors"), "proj_out.weight"));
  EXPECT_EQ(metric(dir.file("a")), metric(dir.file("b")));
  // A checkpoint that lacks a rank's shard is incomplete, and resuming says which file is missing.
  fs::remove(dir.file("b/latest/optimizer-rank1-of-2.safetensors"));
  const Launch r = megaslide(0, "-q train --resume " + dir.file("b") + " --steps 7");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("lacks optimizer-rank1-of-2.safetensors"), std::string::npos) << r.output;
}

// Stopped at step 3 and resumed on the same two ranks: the same bits as the run that did not stop.
TEST(Distributed, ResumeWithTheSameRanksIsBitIdentical) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const Launch whole = megaslide(2, kRun + "--steps 6 --out " + dir.file("whole"));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const Launch first = megaslide(2, kRun + "--steps 3 --out " + dir.file("split"));
  ASSERT_EQ(first.code, 0) << first.output;
  const Launch rest = megaslide(2, "-q train --resume " + dir.file("split") + " --steps 6");
  ASSERT_EQ(rest.code, 0) << rest.output;
  expect_same_files(dir.file("whole/latest"), dir.file("split/latest"),
                    {"model.safetensors", "optimizer-rank0-of-2.safetensors", "optimizer-rank1-of-2.safetensors"});
}

// Saved by two ranks at batch 3, resumed on three at batch 2 (the same global batch of 6; trainer.json edited, as
// the per-rank batch is a saved option) and on one at batch 6: the state is re-sharded on load, and both continue
// as the two ranks do, within fp32 rounding.
TEST(Distributed, ResumeOnOtherRanksReshardsTheState) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const Launch whole = megaslide(2, kRun + "--steps 5 --batch-size 3 --save-every 3 --out " + dir.file("whole"));
  ASSERT_EQ(whole.code, 0) << whole.output;
  for (auto [ranks, batch] : {std::pair{3, 2}, std::pair{0, 6}}) {
    const std::string run = dir.file("on" + std::to_string(ranks));
    fs::create_directories(run);
    fs::copy(dir.file("whole/step-00000003"), run + "/step-00000003", fs::copy_options::recursive);
    fs::create_directory_symlink("step-00000003", run + "/latest");
    fs::copy_file(dir.file("whole/metrics.jsonl"), run + "/metrics.jsonl");
    const std::string trainer = run + "/step-00000003/trainer.json";
    nlohmann::json t = nlohmann::json::parse(read_file(trainer));
    t["options"]["batch_size"] = batch;
    write_file_atomic(trainer, t.dump(2));
    const Launch r = megaslide(ranks, "-q train --resume " + run + " --steps 5");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("re-sharded"), std::string::npos) << r.output;
    const std::vector<double> a = metric(dir.file("whole")), b = metric(run);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(worst_relative(a, b), 1e-4);
    EXPECT_LT(worst_relative(metric(dir.file("whole"), "grad_norm"), metric(run, "grad_norm")), 1e-3);
    const std::vector<float> m = file_tensor(dir.file("whole/latest/model.safetensors"), "head.head.weight"),
                             n = file_tensor(run + "/latest/model.safetensors", "head.head.weight");
    ASSERT_EQ(m.size(), n.size());
    for (size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(m[i], n[i], 1e-2 * std::fabs(m[i]) + 1e-4) << i;
  }
}

// The run the fault tests break: 6 steps on two ranks, a checkpoint every 2.
const std::string kFaultRun = kRun + "--steps 6 --save-every 2 ";

// `run`, a kFaultRun broken on purpose, resumed on two ranks to its end: it must end with the files `names` of the same
// run never broken.
void expect_resume_matches_unbroken(const TempDir& dir, const std::string& run, const std::vector<std::string>& names) {
  const Launch resumed = megaslide(2, "-q train --resume " + run);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const Launch whole = megaslide(2, kFaultRun + "--out " + dir.file("whole"));
  ASSERT_EQ(whole.code, 0) << whole.output;
  expect_same_files(dir.file("whole/latest"), run + "/latest", names);
}

// A rank that dies at step 5 (saves every 2 steps): mpirun ends the job with an error naming that process, the
// checkpoint of step 4 is intact, and resuming from it gives the bits of a run that never failed.
TEST(Distributed, ADeadRankEndsTheRunAndTheLastCheckpointResumes) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const std::string run = dir.file("run");
  const Launch died = megaslide(2, kFaultRun + "--inject-rank-exit 5 --out " + run);
  EXPECT_NE(died.code, 0);
  EXPECT_NE(died.output.find("rank 1: exiting at step 5"), std::string::npos) << died.output;
  EXPECT_NE(died.output.find("exited with non-zero status"), std::string::npos) << died.output;
  EXPECT_EQ(fs::read_symlink(run + "/latest").string(), "step-00000004");
  expect_resume_matches_unbroken(dir, run, {"model.safetensors"});
}

// A rank that dies in the middle of the save of step 4 (rank 0 has written the model into the temporary directory and
// waits for the other shards): the checkpoint of step 2 stays `latest`, the partial one is never published, and the
// resumed run removes it and gives the bits of a run that never failed.
TEST(Distributed, ARankDyingMidSaveLeavesTheLastCheckpoint) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const std::string run = dir.file("run");
  const Launch died = megaslide(2, kFaultRun + "--inject-rank-exit-saving 4 --out " + run);
  EXPECT_NE(died.code, 0);
  EXPECT_NE(died.output.find("rank 1: exiting saving step 4"), std::string::npos) << died.output;
  EXPECT_EQ(fs::read_symlink(run + "/latest").string(), "step-00000002");
  EXPECT_FALSE(fs::exists(run + "/step-00000004"));
  int partial = 0;
  for (const auto& e : fs::directory_iterator(run))
    partial += e.path().filename().string().starts_with("step-00000004.tmp-");
  EXPECT_EQ(partial, 1) << "the save in progress when the rank died";
  expect_resume_matches_unbroken(dir, run, {"model.safetensors", "optimizer-rank1-of-2.safetensors"});
  for (const auto& e : fs::directory_iterator(run))
    EXPECT_FALSE(e.path().filename().string().find(".tmp-") != std::string::npos) << e.path();
}

// A rank that stops answering at step 3: within the collective timeout every rank stops, with one error naming it,
// and the checkpoint of step 2 is intact.
TEST(Distributed, AHungRankIsNamedWithinTheTimeout) {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  const std::string run = dir.file("run");
  const Launch hung = megaslide(2, kFaultRun + "--inject-rank-hang 3 --collective-timeout 3 --out " + run);
  EXPECT_NE(hung.code, 0);
  EXPECT_NE(hung.output.find("rank 1 did not take part"), std::string::npos) << hung.output;
  EXPECT_LT(hung.seconds, 30) << hung.output;
  EXPECT_EQ(fs::read_symlink(run + "/latest").string(), "step-00000002");
  EXPECT_NO_THROW(SafetensorsFile::open(run + "/latest/optimizer-rank1-of-2.safetensors"));
}

}  // namespace
}  // namespace ms::test
