// `megaslide eval VIDEO...`: video metrics (VBench-style temporal flickering and subject consistency,
// flow warping error, dynamic degree, motion-direction accuracy) as a table, JSON lines or a PNG.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "core/check.h"
#include "core/text.h"
#include "eval/plot.h"
#include "eval/video_metrics.h"
#include "io/video.h"

namespace fs = std::filesystem;

namespace ms::cli {
namespace {

struct EvalArgs {
  std::vector<std::string> videos;
  bool json = false;
  std::string direction, colour, plot;
};

struct VideoResult {
  std::string path;
  VideoInfo video;
  std::vector<Metric> metrics;
};

// The caption file beside the video (clip.txt for clip.mp4); "" when there is none.
std::string caption_of(const std::string& video) {
  std::ifstream caption(fs::path(video).replace_extension(".txt"));
  std::stringstream s;
  if (caption) s << caption.rdbuf();
  return s.str();
}

// --expect-direction, or "moving <direction>" in the video's caption file.
std::optional<Direction> expected_direction(const EvalArgs& a, const std::string& caption) {
  if (a.direction.empty()) return direction_from_caption(caption);
  auto d = parse_direction(a.direction);
  if (!d) MS_FAIL("--expect-direction ", quote_text(a.direction), " is unknown; use left, right, up or down");
  return d;
}

// --expect-colour, or the first of the synthetic shapes' colour words in the video's caption file.
std::optional<int> expected_colour(const EvalArgs& a, const std::string& caption) {
  if (a.colour.empty()) return shape_colour_from_caption(caption);
  auto c = parse_shape_colour(a.colour);
  if (!c)
    MS_FAIL("--expect-colour ", quote_text(a.colour),
            " is unknown; use red, green, blue, yellow, cyan, magenta or white");
  return c;
}

std::string value_str(double v) {
  if (std::isnan(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// Metric names in first-seen order over all videos.
std::vector<std::string> metric_names(const std::vector<VideoResult>& results) {
  std::vector<std::string> names;
  for (const auto& r : results)
    for (const auto& m : r.metrics)
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
  return names;
}

double find_metric(const VideoResult& r, const std::string& name) {
  for (const auto& m : r.metrics)
    if (m.name == name) return m.value;
  return NAN;
}

// One row per metric, one column per video (as wide as its file name).
void print_table(const std::vector<VideoResult>& results) {
  const std::vector<std::string> names = metric_names(results);
  std::vector<int> width;  // [videos] column widths
  std::printf("%-26s", "metric");
  for (const auto& r : results) {
    const std::string name = fs::path(r.path).filename().string();
    width.push_back(std::max(10, int(name.size())));
    std::printf("  %*s", width.back(), name.c_str());
  }
  std::printf("\n");
  for (const auto& n : names) {
    std::printf("%-26s", n.c_str());
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("  %*s", width[i], value_str(find_metric(results[i], n)).c_str());
    std::printf("\n");
  }
  for (size_t i = 0; i < results.size(); ++i)
    std::printf("%s%s: %lld frames of %lldx%lld\n", i ? "" : "\n", results[i].path.c_str(),
                static_cast<long long>(results[i].video.frames), static_cast<long long>(results[i].video.height),
                static_cast<long long>(results[i].video.width));
}

void run_eval(const EvalArgs& a) {
  std::vector<VideoResult> results;
  for (const auto& path : a.videos) {
    const std::string caption = caption_of(path);
    VideoMetrics metrics(expected_direction(a, caption), expected_colour(a, caption));
    VideoResult r{path,
                  stream_video(path,
                               [&](const uint8_t* rgb, int64_t height, int64_t width) {
                                 metrics.add_frame(rgb, height, width);
                                 return true;
                               }),
                  {}};
    r.metrics = metrics.finish();
    if (a.json) {
      nlohmann::json j{
          {"video", path}, {"frames", r.video.frames}, {"height", r.video.height}, {"width", r.video.width}};
      for (const auto& m : r.metrics) j[m.name] = m.value;  // NaN is written as null
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    results.push_back(std::move(r));
  }
  if (!a.json) print_table(results);
  if (!a.plot.empty()) {
    std::vector<std::string> items;
    for (const auto& r : results) items.push_back(fs::path(r.path).filename().string());
    std::vector<BarPanel> panels;
    for (const auto& n : metric_names(results)) {
      BarPanel p{n, {}};
      for (const auto& r : results) p.values.push_back(find_metric(r, n));
      panels.push_back(std::move(p));
    }
    plot_bars(a.plot, items, panels);
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Video metrics: temporal flickering, SSIM subject consistency, flow warping error, dynamic degree, "
      "motion direction; for clips of the built-in shapes, colour accuracy and one compact shape");
  cmd->add_option("videos", a->videos, "Video files (any container FFmpeg decodes)")->required();
  cmd->add_flag("--json", a->json, "One JSON object per video (a line each), keyed by metric name");
  cmd->add_option("--expect-direction", a->direction,
                  "left|right|up|down: score motion_direction_accuracy against it (default: 'moving <direction>' in "
                  "the caption file beside each video, clip.txt for clip.mp4)");
  cmd->add_option("--expect-colour", a->colour,
                  "red|green|blue|yellow|cyan|magenta|white: the clip is of the built-in shapes; score "
                  "colour_accuracy against it and one_shape (default: a colour word in the caption file)");
  cmd->add_option("--plot", a->plot, "Also draw the metrics as bar charts into this PNG");
  cmd->callback([a] { run_eval(*a); });
}

}  // namespace ms::cli
