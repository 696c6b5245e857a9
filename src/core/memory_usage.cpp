#include "core/memory_usage.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/text.h"
#include "core/units.h"

namespace ms {
namespace {

namespace fs = std::filesystem;

// A small text file whole, or "" when it cannot be read.
std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    out.push_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return out;
}

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t begin = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > begin) out.push_back(line.substr(begin, i - begin));
  }
  return out;
}

// A decimal count, or -1 for anything else (cgroup's "max", an empty file, overflow).
int64_t parse_count(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty() || s.size() > 18) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// memory.stat's "key value" lines: value of key, or 0 when absent.
int64_t stat_field(std::string_view text, std::string_view key) {
  for (std::string_view line : lines_of(text)) {
    const auto w = words_of(line);
    if (w.size() == 2 && w[0] == key) return std::max<int64_t>(0, parse_count(w[1]));
  }
  return 0;
}

// Whether a comma-separated list holds `item`.
bool has_item(std::string_view list, std::string_view item) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == item) return true;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return false;
}

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](size_t j, char hi) { return j < s.size() && s[j] >= '0' && s[j] <= hi; };
    if (s[i] == '\\' && octal(i + 1, '3') && octal(i + 2, '7') && octal(i + 3, '7')) {
      out += char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A memory cgroup hierarchy: where it is mounted and which of its cgroups holds this process.
struct CgroupMount {
  int version = 0;      // 1 or 2; 0: none found
  std::string root;     // the hierarchy's path that is mounted (mountinfo's 4th field)
  std::string point;    // where
  std::string process;  // this process's cgroup in the hierarchy (/proc/self/cgroup)
};

// The mounts of the v1 memory controller and of cgroup2 that hold this process's cgroups.
std::vector<CgroupMount> cgroup_mounts(const ProcFiles& files) {
  std::string v1_path, v2_path;
  bool has_v1 = false, has_v2 = false;
  const std::string cgroup = read_text(files.cgroup), mountinfo = read_text(files.mountinfo);
  for (std::string_view line : lines_of(cgroup)) {  // "id:controllers:path"
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const std::string_view path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      has_v2 = true;
      v2_path = path;
    }
    if (has_item(controllers, "memory")) {
      has_v1 = true;
      v1_path = path;
    }
  }
  std::vector<CgroupMount> out;
  for (std::string_view line : lines_of(mountinfo)) {
    // "id parent major:minor root mount-point options [optional...] - fstype source super-options"
    const auto w = words_of(line);
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 5 || dash == w.end() || w.end() - dash < 4) continue;
    const std::string_view type = dash[1], super = dash[3];
    CgroupMount m;
    if (type == "cgroup2" && has_v2) {
      m.version = 2;
      m.process = v2_path;
    } else if (type == "cgroup" && has_v1 && has_item(super, "memory")) {
      m.version = 1;
      m.process = v1_path;
    } else {
      continue;
    }
    m.root = unescape_octal(w[3]);
    m.point = unescape_octal(w[4]);
    out.push_back(m);
  }
  return out;
}

// The tightest limit over the process's cgroup and its ancestors in one hierarchy, if any.
void add_cgroup_limits(const CgroupMount& m, std::vector<HostLimit>& out) {
  // The process's cgroup below the mounted root; a cgroup namespace may show paths the mount does not start with.
  std::string rel = m.process;
  if (m.root != "/" && rel.compare(0, m.root.size(), m.root) == 0 &&
      (rel.size() == m.root.size() || rel[m.root.size()] == '/'))
    rel = rel.substr(m.root.size());
  else if (m.root != "/")
    rel = "";
  fs::path dir = fs::path(m.point) / fs::path(rel).relative_path();
  if (!fs::exists(dir)) dir = m.point;
  const char* limit_file = m.version == 2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_file = m.version == 2 ? "memory.current" : "memory.usage_in_bytes";
  const char* inactive = m.version == 2 ? "inactive_file" : "total_inactive_file";
  const fs::path top = fs::path(m.point).lexically_normal();
  HostLimit best;
  best.bytes = -1;
  for (fs::path at = dir.lexically_normal();; at = at.parent_path()) {
    const int64_t limit = parse_count(read_text((at / limit_file).string()));
    if (limit >= 0 && limit < (int64_t(1) << 60)) {  // v1 writes "no limit" as about 2^63
      const int64_t usage = std::max<int64_t>(0, parse_count(read_text((at / usage_file).string())));
      const int64_t reclaimable = stat_field(read_text((at / "memory.stat").string()), inactive);
      const int64_t in_use = std::max<int64_t>(0, usage - reclaimable);
      const int64_t left = std::max<int64_t>(0, limit - in_use);
      if (best.bytes < 0 || left < best.bytes)
        best = {left, cat("the memory cgroup's ", limit_file, " of ", at.string(), " (cgroup v", m.version,
                          "): ", format_bytes(double(limit)), ", ", format_bytes(double(in_use)), " of it in use")};
    }
    if (at == top || !at.has_relative_path() || at.parent_path() == at) break;
  }
  if (best.bytes >= 0) out.push_back(best);
}

void add_rlimit(int resource, const char* name, const char* status_key, const std::string& status,
                std::vector<HostLimit>& out) {
  rlimit r{};
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  const int64_t limit = r.rlim_cur > rlim_t(INT64_MAX) ? INT64_MAX : int64_t(r.rlim_cur);
  const int64_t used = std::max<int64_t>(0, kib_field(status, status_key));
  out.push_back(
      {std::max<int64_t>(0, limit - used), cat(name, " ", format_bytes(double(limit)), ", ", format_bytes(double(used)),
                                               " of it already mapped (", status_key, " in /proc/self/status)")});
}

}  // namespace

int64_t resident_bytes() { return kib_field(read_text("/proc/self/status"), "VmRSS"); }
int64_t peak_resident_bytes() { return kib_field(read_text("/proc/self/status"), "VmHWM"); }

bool reset_peak_resident() {
  std::ofstream f("/proc/self/clear_refs");
  return bool(f << "5");
}

int64_t kib_field(std::string_view text, std::string_view key) {
  for (std::string_view line : lines_of(text)) {
    if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ':') continue;
    const auto w = words_of(line.substr(key.size() + 1));
    if (w.size() != 2 || w[1] != "kB") return -1;
    const int64_t kib = parse_count(w[0]);
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

std::vector<HostLimit> host_limits(const ProcFiles& files) {
  std::vector<HostLimit> out;
  const std::string meminfo = read_text(files.meminfo);
  int64_t available = kib_field(meminfo, "MemAvailable");
  if (available < 0) available = kib_field(meminfo, "MemFree");  // kernels before 3.14
  if (available >= 0) {
    const int64_t total = kib_field(meminfo, "MemTotal");
    out.push_back({available, cat("MemAvailable in ", files.meminfo,
                                  total > 0 ? " (of " + format_bytes(double(total)) + " MemTotal)" : "")});
  }
  for (const CgroupMount& m : cgroup_mounts(files)) add_cgroup_limits(m, out);
  const std::string status = read_text(files.status);
  add_rlimit(RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize", status, out);
  add_rlimit(RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData", status, out);
  return out;
}

int64_t parse_host_memory(const std::string& text) {
  const int64_t bytes = parse_bytes(text, "--host-memory");
  if (bytes <= 0) MS_FAIL("--host-memory must be positive, got ", quote_text(text));
  return bytes;
}

HostLimit host_limit(int64_t given, const ProcFiles& files) {
  if (given > 0) return {given, "--host-memory"};
  const std::vector<HostLimit> all = host_limits(files);
  if (all.empty()) return {INT64_MAX, "no limit found (/proc unreadable)"};
  return *std::min_element(all.begin(), all.end(),
                           [](const HostLimit& a, const HostLimit& b) { return a.bytes < b.bytes; });
}

void require_host_memory(const std::string& what, int64_t need, const std::string& detail, const HostLimit& limit,
                         const std::string& fix) {
  if (need <= limit.bytes) return;
  MS_FAIL(what, " needs ", format_bytes(double(need)), " of host memory (", detail, ") but ", limit.source, " leaves ",
          format_bytes(double(limit.bytes)), ". ", fix,
          limit.source == "--host-memory" ? "" : "; --host-memory overrides the detected limit");
}

}  // namespace ms
