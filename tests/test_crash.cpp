// Checkpoint writes that never finish: `megaslide train --save-every 1` killed with SIGKILL at random
// moments (most of them inside a checkpoint write), and a write that fails because the disk is full.
// After each, OUT/latest names a complete checkpoint, --resume continues from it, and the finished run
// is bit-identical to one that was never interrupted.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string_view>
#include <thread>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace ms::test {
namespace {

using Clock = std::chrono::steady_clock;

// `megaslide train` on the tiny preset with 1x8x8 clips and a checkpoint after every step.
std::vector<std::string> train_args(const std::string& out, int64_t steps) {
  return {"train",
          "--model",
          "tiny",
          "--frames",
          "1",
          "--height",
          "8",
          "--width",
          "8",
          "--steps",
          std::to_string(steps),
          "--save-every",
          "1",
          "--out",
          out};
}

std::vector<std::string> resume_args(const std::string& out, int64_t steps) {
  return {"train", "--resume", out, "--steps", std::to_string(steps)};
}

// Starts the binary with `args` on one thread (many short runs on a shared machine), stdout and stderr
// into `log`. With a file-size limit, writes past it fail with EFBIG (SIGXFSZ ignored), as on a full disk.
pid_t spawn(const std::vector<std::string>& args, const std::string& log, rlim_t file_size_limit = RLIM_INFINITY) {
  std::vector<char*> argv{const_cast<char*>("megaslide")}, env;  // built before fork: no allocation in the child
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("OMP_NUM_THREADS=", 0) != 0) env.push_back(*e);
  env.push_back(const_cast<char*>("OMP_NUM_THREADS=1"));
  env.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (file_size_limit != RLIM_INFINITY) {
      signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{file_size_limit, file_size_limit};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    execve(MEGASLIDE_BINARY, argv.data(), env.data());
    _exit(127);
  }
  return pid;
}

// Exit code of a finished child, or -signal when a signal ended it.
int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

bool is_checkpoint_temp(const std::string& name) {
  return name.rfind("step-", 0) == 0 && name.find(".tmp-") != name.npos;
}

// Creations and renames into one directory, as inotify reports them.
class DirWatch {
 public:
  explicit DirWatch(const std::string& dir) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    MS_CHECK(fd_ >= 0 && inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MOVED_TO) >= 0, "inotify on ", dir);
  }
  ~DirWatch() { ::close(fd_); }
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // The name of the next entry created or renamed into the directory; "" when none came within timeout_ms.
  std::string next(int timeout_ms) {
    if (names_.empty()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return "";
      alignas(inotify_event) char buf[16384];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      for (ssize_t i = 0; i < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + i);
        if (e->len > 0) names_.emplace_back(e->name);
        i += ssize_t(sizeof(inotify_event) + e->len);
      }
      if (names_.empty()) return "";
    }
    std::string name = names_.front();
    names_.pop_front();
    return name;
  }

 private:
  int fd_;
  std::deque<std::string> names_;
};

int64_t step_of(const std::string& dir_name) { return std::stoll(dir_name.substr(5)); }

// Complete step directories (step-NNNNNNNN, no suffix) in OUT, newest last.
std::vector<int64_t> step_dirs(const fs::path& out) {
  static const std::regex pattern("step-[0-9]{8}");
  std::vector<int64_t> steps;
  for (const auto& e : fs::directory_iterator(out))
    if (std::regex_match(e.path().filename().string(), pattern)) steps.push_back(step_of(e.path().filename()));
  std::sort(steps.begin(), steps.end());
  return steps;
}

// Entries a writer leaves only while it runs: NAME.tmp-PID and NAME.old-PID.
std::vector<std::string> temporaries(const fs::path& out) {
  static const std::regex pattern(".*\\.(tmp|old)-[0-9]+");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out))
    if (std::regex_match(e.path().filename().string(), pattern)) names.push_back(e.path().filename());
  return names;
}

// The step OUT/latest names after checking that it is a complete checkpoint; -1 when there is none yet.
int64_t check_latest(const fs::path& out) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(out / "latest", ec);
  if (ec) return -1;
  EXPECT_TRUE(std::regex_match(target.string(), std::regex("step-[0-9]{8}"))) << "latest -> " << target;
  const int64_t step = step_of(target.string());
  const fs::path dir = out / target;
  EXPECT_NO_THROW(SafetensorsFile::open((dir / "model.safetensors").string())) << dir;
  EXPECT_NO_THROW(SafetensorsFile::open((dir / "optimizer.safetensors").string())) << dir;
  EXPECT_TRUE(fs::exists(dir / "config.json")) << dir;
  EXPECT_EQ(nlohmann::json::parse(read_file((dir / "trainer.json").string()))["step"], step) << dir;
  // a step directory renamed into place but not yet named by latest is at most one step ahead
  EXPECT_LE(step_dirs(out).back(), step + 1);
  return step;
}

// metrics.jsonl without the wall-clock fields.
std::vector<nlohmann::json> metric_fields_of(const fs::path& out) {
  std::vector<nlohmann::json> lines;
  std::ifstream f(out / "metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    lines.push_back({j["step"], j["loss"], j["lr"], j["grad_norm"], j["skipped"]});
  }
  return lines;
}

// The finished run in `out` equals the reference run `ref`: checkpoint bytes, trainer state and metrics.
void expect_same_run(const fs::path& ref, const fs::path& out, int64_t steps) {
  const fs::path last = fs::path("step-" + std::string(8 - std::to_string(steps).size(), '0') + std::to_string(steps));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(read_file((ref / last / f).string()), read_file((out / last / f).string())) << f;
  auto a = nlohmann::json::parse(read_file((ref / "latest/trainer.json").string()));
  auto b = nlohmann::json::parse(read_file((out / "latest/trainer.json").string()));
  for (const char* k : {"step", "rng_state", "data_position"}) EXPECT_EQ(a[k], b[k]) << k;
  EXPECT_EQ(metric_fields_of(ref), metric_fields_of(out));
  EXPECT_EQ(metric_fields_of(out).size(), size_t(steps));
}

}  // namespace

TEST(Crash, SigkillDuringCheckpointWritesNeverBreaksLatestAndResumeIsBitIdentical) {
  constexpr int64_t kSteps = 120;  // enough that the run outlasts the kills
  constexpr int kMinWrites = 100;  // checkpoint writes begun by killed runs
  std::mt19937_64 rng(20240611);
  TempDir dir;
  const fs::path ref = dir.path / "ref", out = dir.path / "run";
  const std::string log = dir.file("log");
  fs::create_directories(ref);
  fs::create_directories(out);

  // the uninterrupted reference run; its checkpoint writes (temp directory to `latest`) time the kills
  double write_us = 0;
  int writes_timed = 0;
  {
    DirWatch watch(ref.string());
    const pid_t pid = spawn(train_args(ref.string(), kSteps), log);
    Clock::time_point begun;
    for (std::string name; !(name = watch.next(20000)).empty();) {
      if (is_checkpoint_temp(name)) begun = Clock::now();
      if (name == "latest") {
        write_us += std::chrono::duration<double, std::micro>(Clock::now() - begun).count();
        if (++writes_timed == kSteps) break;
      }
    }
    ASSERT_EQ(wait_child(pid), 0) << read_file(log);
    ASSERT_EQ(writes_timed, kSteps);
  }
  write_us /= writes_timed;

  // killed runs: each is killed a random time after its k-th checkpoint write began, k in 1..3
  std::uniform_int_distribution<int> writes_before_kill(1, 3);
  std::uniform_real_distribution<double> delay_us(0, 1.2 * write_us);
  int writes = 0, kills = 0, mid_write = 0;
  DirWatch watch(out.string());
  while (writes < kMinWrites) {
    const int64_t latest = check_latest(out);
    const bool fresh = latest < 0;
    if (fresh && kills > 0) {  // killed before its first checkpoint: there is nothing to resume
      CliResult r = run_cli("train --resume " + out.string());
      EXPECT_EQ(r.code, 1);
      EXPECT_NE(r.output.find("no complete checkpoint"), std::string::npos) << r.output;
    }
    const pid_t pid = spawn(fresh ? train_args(out.string(), kSteps) : resume_args(out.string(), kSteps), log);
    const int k = writes_before_kill(rng);
    int begun = 0;
    for (std::string name; begun < k && !(name = watch.next(20000)).empty();) begun += is_checkpoint_temp(name);
    ASSERT_EQ(begun, k) << "the run stopped writing checkpoints: " << read_file(log);
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(delay_us(rng)));
    kill(pid, SIGKILL);
    ASSERT_EQ(wait_child(pid), -SIGKILL) << "the run ended before the kill; raise kSteps";
    writes += k;
    ++kills;
    if (!fresh) {
      EXPECT_NE(read_file(log).find(" at step " + std::to_string(latest) + " of "), std::string::npos)
          << "resumed from another checkpoint than latest (step " << latest << "): " << read_file(log);
    }
    // landed inside a write: its temporaries are still there, or a renamed step is not yet `latest`
    const std::string suffix = "-" + std::to_string(pid);
    const auto temps = temporaries(out);
    const int64_t now_latest = check_latest(out);
    mid_write += std::any_of(temps.begin(), temps.end(),
                             [&](const std::string& n) { return n.size() > suffix.size() && n.ends_with(suffix); }) ||
                 (!step_dirs(out).empty() && step_dirs(out).back() > now_latest);
    for (std::string name; !(name = watch.next(0)).empty();) writes += is_checkpoint_temp(name);
  }
  std::printf("[ crash    ] %d kills during %d checkpoint writes, %d inside a write (mean write %.0f us)\n", kills,
              writes, mid_write, write_us);
  RecordProperty("kills", kills);
  RecordProperty("kills_mid_write", mid_write);

  ASSERT_GE(check_latest(out), 0);
  const pid_t pid = spawn(resume_args(out.string(), kSteps), log);
  ASSERT_EQ(wait_child(pid), 0) << read_file(log);
  expect_same_run(ref, out, kSteps);
  EXPECT_EQ(temporaries(out), std::vector<std::string>{}) << "temporaries of killed runs are left in " << out;
}

TEST(Crash, FullDiskDuringACheckpointKeepsTheLastOneAndResumes) {
  std::mt19937_64 rng(11);
  TempDir dir;
  const fs::path ref = dir.path / "ref", out = dir.path / "run", step2 = out / "step-00000002";
  const std::string log = dir.file("log");
  ASSERT_EQ(wait_child(spawn(train_args(ref.string(), 4), log)), 0) << read_file(log);
  ASSERT_EQ(wait_child(spawn(train_args(out.string(), 2), log)), 0) << read_file(log);
  const std::string model = read_file((step2 / "model.safetensors").string());
  const std::string optimizer = read_file((step2 / "optimizer.safetensors").string());
  // file-size limits that cut the step-3 checkpoint's model file, then its optimizer file, short
  // (above 64 KiB: the log and metrics.jsonl still fit)
  const rlim_t limits[] = {std::uniform_int_distribution<rlim_t>(1 << 16, model.size() - 1)(rng),
                           std::uniform_int_distribution<rlim_t>(model.size(), optimizer.size() - 1)(rng)};
  for (const rlim_t limit : limits) {
    EXPECT_EQ(wait_child(spawn(resume_args(out.string(), 4), log, limit)), 1) << limit;
    const std::string err = read_file(log);
    for (const std::string& part :
         {std::string(limit < model.size() ? "model" : "optimizer") + ".safetensors", std::string("File too large"),
          std::string("checkpoint of step 3 not saved"), step2.string() + " (", "--resume " + out.string()})
      EXPECT_NE(err.find(part), std::string::npos) << "limit " << limit << ": no '" << part << "' in\n" << err;
    EXPECT_EQ(check_latest(out), 2);
    EXPECT_EQ(step_dirs(out), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(temporaries(out), std::vector<std::string>{});
    EXPECT_EQ(read_file((step2 / "model.safetensors").string()), model);
    EXPECT_EQ(read_file((step2 / "optimizer.safetensors").string()), optimizer);
  }
  ASSERT_EQ(wait_child(spawn(resume_args(out.string(), 4), log)), 0) << read_file(log);
  expect_same_run(ref, out, 4);
}

}  // namespace ms::test
