// What this process can get in host memory (core/memory_usage.h), read from fixture /proc and cgroup files shaped
// like the kernel's (cgroup v1 and v2, a container's namespaced view, a hybrid mount), and RLIMIT_AS in a child.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/memory_usage.h"
#include "core/work_progress.h"
#include "temp_dir.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A /proc of fixtures: meminfo with 3,500,000 kB available, no cgroup unless a test writes one.
struct FakeProc {
  TempDir dir;
  ProcFiles files;
  FakeProc() {
    files.meminfo = dir.file("meminfo");
    files.cgroup = dir.file("cgroup");
    files.mountinfo = dir.file("mountinfo");
    files.status = dir.file("status");
    write_text(files.meminfo,
               "MemTotal:        8000000 kB\nMemFree:          200000 kB\nMemAvailable:    3500000 kB\n"
               "Buffers:           12345 kB\nCached:          2000000 kB\n");
    write_text(files.status, "Name:\tmegaslide\nVmPeak:\t  900000 kB\nVmSize:\t  800000 kB\nVmData:\t  300000 kB\n");
    write_text(files.cgroup, "");
    write_text(files.mountinfo, "");
  }
  fs::path root() const { return dir.path; }
};

// The limits other than the process's own rlimits (the test runner's are not ours to know).
std::vector<HostLimit> file_limits(const ProcFiles& f) {
  std::vector<HostLimit> out;
  for (const HostLimit& l : host_limits(f))
    if (l.source.rfind("RLIMIT", 0) != 0) out.push_back(l);
  return out;
}

TEST(HostMemory, KibFieldsOfMeminfoAndStatus) {
  const std::string text = "MemTotal:       24683792 kB\nMemAvailable:   24207816 kB\nHugePages_Total:       0\n";
  EXPECT_EQ(kib_field(text, "MemTotal"), int64_t(24683792) * 1024);
  EXPECT_EQ(kib_field(text, "MemAvailable"), int64_t(24207816) * 1024);
  EXPECT_EQ(kib_field(text, "HugePages_Total"), -1);  // not in kB
  EXPECT_EQ(kib_field(text, "Mem"), -1);              // a prefix of a key is not the key
  EXPECT_EQ(kib_field(text, "SwapTotal"), -1);
  EXPECT_EQ(kib_field("VmRSS:\t  123 kB\n", "VmRSS"), 123 * 1024);
  EXPECT_EQ(kib_field("VmRSS:\t  12x3 kB\n", "VmRSS"), -1);
}

TEST(HostMemory, MemAvailableAloneWithoutACgroup) {
  FakeProc p;
  const auto limits = file_limits(p.files);
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].bytes, int64_t(3500000) * 1024);
  EXPECT_NE(limits[0].source.find("MemAvailable"), std::string::npos) << limits[0].source;
  // A kernel before 3.14 has no MemAvailable: MemFree stands in.
  write_text(p.files.meminfo, "MemTotal:        8000000 kB\nMemFree:          200000 kB\n");
  ASSERT_EQ(file_limits(p.files).size(), 1u);
  EXPECT_EQ(file_limits(p.files)[0].bytes, int64_t(200000) * 1024);
}

TEST(HostMemory, CgroupV2TakesTheTightestAncestorLessReclaimableCache) {
  FakeProc p;
  const fs::path mount = p.root() / "sys fs" / "cgroup";  // a space, escaped as \040 in mountinfo
  write_text(p.files.cgroup, "0::/user.slice/app.scope\n");
  write_text(p.files.mountinfo,
             "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
             "30 23 0:26 / " +
                 (p.root() / "sys\\040fs" / "cgroup").string() +
                 " rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate\n");
  // user.slice: 8 GB limit, 3 GB charged of which 1 GB inactive file pages: 6 GB left.
  write_text(mount / "user.slice" / "memory.max", "8000000000\n");
  write_text(mount / "user.slice" / "memory.current", "3000000000\n");
  write_text(mount / "user.slice" / "memory.stat", "anon 1500000000\nfile 1500000000\ninactive_file 1000000000\n");
  // app.scope: no limit of its own.
  write_text(mount / "user.slice" / "app.scope" / "memory.max", "max\n");
  write_text(mount / "user.slice" / "app.scope" / "memory.current", "2500000000\n");
  auto limits = file_limits(p.files);
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[1].bytes, 6'000'000'000);
  EXPECT_NE(limits[1].source.find("memory.max of " + (mount / "user.slice").string()), std::string::npos)
      << limits[1].source;
  EXPECT_NE(limits[1].source.find("cgroup v2"), std::string::npos);
  // A tighter limit below it wins: 4 GB, 2.5 GB charged, 0.5 GB of it inactive file pages.
  write_text(mount / "user.slice" / "app.scope" / "memory.max", "4000000000\n");
  write_text(mount / "user.slice" / "app.scope" / "memory.stat", "inactive_file 500000000\n");
  limits = file_limits(p.files);
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[1].bytes, 2'000'000'000);
  EXPECT_NE(limits[1].source.find("app.scope"), std::string::npos) << limits[1].source;
  const HostLimit smallest = host_limit(0, p.files);
  EXPECT_LE(smallest.bytes, 2'000'000'000);
}

TEST(HostMemory, CgroupV1InAContainersNamespacedMount) {
  FakeProc p;
  // Docker without a cgroup namespace: /proc/self/cgroup names the host's path, the container mounts that path.
  const fs::path mount = p.root() / "fs" / "memory";
  write_text(p.files.cgroup, "12:pids:/docker/abc\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n");
  write_text(p.files.mountinfo, "35 31 0:32 /docker/abc " + mount.string() +
                                    " ro,nosuid - cgroup cgroup rw,memory\n"
                                    "41 31 0:38 /docker/abc " +
                                    (p.root() / "unified").string() + " rw - cgroup2 cgroup2 rw\n");
  write_text(mount / "memory.limit_in_bytes", "2147483648\n");
  write_text(mount / "memory.usage_in_bytes", "1073741824\n");
  write_text(mount / "memory.stat", "cache 600000000\ninactive_file 1\ntotal_inactive_file 536870912\n");
  fs::create_directories(p.root() / "unified");  // the hybrid mount's v2 side holds no memory controller
  const auto limits = file_limits(p.files);
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[1].bytes, 2147483648 - (1073741824 - 536870912));
  EXPECT_NE(limits[1].source.find("memory.limit_in_bytes"), std::string::npos) << limits[1].source;
  EXPECT_NE(limits[1].source.find("cgroup v1"), std::string::npos);
  // v1 writes "no limit" as a page-rounded 2^63.
  write_text(mount / "memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(file_limits(p.files).size(), 1u);
}

TEST(HostMemory, UsageAboveTheLimitLeavesNothingAndGivenOverrides) {
  FakeProc p;
  const fs::path mount = p.root() / "cg";
  write_text(p.files.cgroup, "0::/\n");
  write_text(p.files.mountinfo, "30 23 0:26 / " + mount.string() + " rw - cgroup2 cgroup2 rw\n");
  write_text(mount / "memory.max", "1000000\n");
  write_text(mount / "memory.current", "5000000\n");
  const HostLimit l = host_limit(0, p.files);
  EXPECT_EQ(l.bytes, 0);
  const HostLimit given = host_limit(123456789, p.files);
  EXPECT_EQ(given.bytes, 123456789);
  EXPECT_EQ(given.source, "--host-memory");
}

TEST(HostMemory, RlimitAsLessWhatIsMappedInAChild) {
  const pid_t pid = fork();
  if (pid == 0) {  // RLIMIT_AS only in a child: the test process keeps its own address space
    const int64_t mapped = kib_field(
        [] {
          std::ifstream f("/proc/self/status");
          return std::string(std::istreambuf_iterator<char>(f), {});
        }(),
        "VmSize");
    const rlim_t room = rlim_t(mapped) + (rlim_t(1) << 30);
    const struct rlimit limit { room, room };
    if (mapped <= 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(2);
    const HostLimit l = host_limit();
    if (l.source.find("RLIMIT_AS") == std::string::npos) _exit(3);
    // 1 GiB, less what reading the files mapped meanwhile.
    _exit(l.bytes <= (int64_t(1) << 30) && l.bytes > (int64_t(1) << 30) - (int64_t(64) << 20) ? 0 : 4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Off a terminal (as under ctest), long work logs its size and then each quarter; small work logs nothing.
TEST(WorkProgress, LogsEachQuarterOfLongWorkAndNothingOfSmall) {
  ASSERT_FALSE(::isatty(2));
  ::testing::internal::CaptureStderr();
  {
    WorkProgress p("loading weights.safetensors", 1000, 4, 4000);
    for (int i = 0; i < 7; ++i) p.advance(i < 6 ? 130 : 220);  // 130 .. 780, then 1000
  }
  {
    WorkProgress small("initialising", 999, 4, 4000);
    small.advance(999);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("loading weights.safetensors: 4.00 KB\n"), std::string::npos) << out;
  for (const char* q : {": 25% in ", ": 50% in ", ": 75% in ", ": 100% in "})
    EXPECT_NE(out.find(std::string("loading weights.safetensors") + q), std::string::npos) << q << "\n" << out;
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 5u) << out;  // the size, four quarters, nothing for the small one
  EXPECT_EQ(out.find("initialising"), std::string::npos) << out;
}

}  // namespace
}  // namespace ms::test
