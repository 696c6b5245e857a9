#include "train/run_directory.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;

namespace ms {
namespace {

// Drops the lines of metrics.jsonl past `step`.
void trim_metrics(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("step") && j["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  write_file_atomic(path.string(), kept);
}

}  // namespace

RunDirectory::RunDirectory(const std::string& out, int64_t step) : out_(out) {
  const fs::path dir(out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    MS_FAIL("cannot create run directory '", out, "': ", ec ? ec.message() : "not a directory");
  remove_stale_temporaries(out);
  trim_metrics(dir / "metrics.jsonl", step);
  metrics_.open(dir / "metrics.jsonl", std::ios::app);
  if (!metrics_) MS_FAIL("cannot write '", (dir / "metrics.jsonl").string(), "'; check the run directory is writable");
}

void RunDirectory::write_summary(const nlohmann::json& summary) const {
  write_file_atomic((fs::path(out_) / "summary.json").string(), summary.dump(2) + "\n");
}

void RunDirectory::append_metrics(const nlohmann::json& line) {
  metrics_ << line.dump() << "\n";
  metrics_.flush();
}

}  // namespace ms
