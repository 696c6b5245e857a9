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

// Creates the run directory (and clears what a killed run left) before its files open.
const std::string& made_run_directory(const std::string& out) {
  const fs::path dir(out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    MS_FAIL("cannot create run directory '", out, "': ", ec ? ec.message() : "not a directory");
  remove_stale_temporaries(out);
  return out;
}

}  // namespace

RunDirectory::RunDirectory(const std::string& out, int64_t step) : out_(made_run_directory(out)), events_(out, step) {
  const fs::path dir(out);
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
  std::vector<std::pair<std::string, double>> scalars;
  for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_second"})
    if (line.contains(key) && line[key].is_number()) scalars.emplace_back(cat("train/", key), line[key].get<double>());
  events_.scalars(line.at("step").get<int64_t>(), scalars);
}

void RunDirectory::add_sample_sheet(int64_t step, const std::string& png, int64_t width, int64_t height) {
  std::ifstream in(png, std::ios::binary);
  events_.image(step, "samples", std::string(std::istreambuf_iterator<char>(in), {}), width, height);
}

}  // namespace ms
