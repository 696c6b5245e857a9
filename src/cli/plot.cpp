// `megaslide plot RUN_DIR... --out loss.png`: training curves from each run's metrics.jsonl.
#include "eval/plot.h"

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/check.h"

namespace ms::cli {
namespace {

struct PlotArgs {
  std::vector<std::string> runs;
  std::string out, metric = "loss";
  int64_t smooth = 1;
};

// (step, metric) from run/metrics.jsonl, smoothed by a trailing mean over `smooth` points.
PlotSeries read_series(const std::string& run, const std::string& metric, int64_t smooth) {
  const std::string path = run + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) MS_FAIL("cannot read '", path, "'; pass run directories written by megaslide train");
  PlotSeries s{run, {}, {}};
  std::vector<double> raw;  // [points] unsmoothed values
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains(metric) || !j[metric].is_number()) continue;
    s.x.push_back(j["step"].get<double>());
    raw.push_back(j[metric].get<double>());
    double sum = 0;
    const size_t first = raw.size() > size_t(smooth) ? raw.size() - size_t(smooth) : 0;
    for (size_t i = first; i < raw.size(); ++i) sum += raw[i];
    s.y.push_back(sum / double(raw.size() - first));
  }
  if (s.x.empty())
    MS_FAIL("'", path, "' has no numeric '", metric, "' values; metrics.jsonl lines carry step, loss, ",
            "lr, grad_norm, seconds, tokens_per_second, device_peak_bytes");
  return s;
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand("plot", "Draw training curves (metrics.jsonl of each run) into a PNG");
  cmd->add_option("runs", a->runs, "Run directories (megaslide train --out)")->required();
  cmd->add_option("--out", a->out, "PNG to write")->required();
  cmd->add_option("--metric", a->metric, "metrics.jsonl field: loss, grad_norm, lr, tokens_per_second, ...")
      ->capture_default_str();
  cmd->add_option("--smooth", a->smooth, "Trailing mean over N points (1: raw)")->capture_default_str();
  cmd->callback([a] {
    if (a->smooth < 1) MS_FAIL("--smooth must be >= 1 (1: raw values), got ", a->smooth);
    std::vector<PlotSeries> series;
    for (const auto& run : a->runs) series.push_back(read_series(run, a->metric, a->smooth));
    const std::string title = a->metric + (a->smooth > 1 ? cat(" (trailing mean of ", a->smooth, ")") : "");
    plot_lines(a->out, title, "step", a->metric, series);
  });
}

}  // namespace ms::cli
