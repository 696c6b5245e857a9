#include "eval/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/check.h"

namespace ms {
namespace {

const cv::Scalar kWhite(255, 255, 255), kBlack(0, 0, 0), kGrid(225, 225, 225), kAxis(90, 90, 90);
// Tableau-like palette, BGR.
const cv::Scalar kPalette[] = {{180, 119, 31}, {14, 127, 255},  {44, 160, 44},   {40, 39, 214},  {189, 103, 148},
                               {75, 86, 140},  {194, 119, 227}, {127, 127, 127}, {34, 189, 188}, {207, 190, 23}};
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

cv::Scalar colour(size_t i) { return kPalette[i % std::size(kPalette)]; }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

enum class Align { left, centre, right };

// Text with its baseline at `at`, aligned horizontally on at.x.
void text(cv::Mat& img, const std::string& s, cv::Point at, double scale = 0.45, cv::Scalar c = kBlack,
          Align align = Align::left) {
  int base = 0;
  const int width = cv::getTextSize(s, kFont, scale, 1, &base).width;
  if (align == Align::centre) at.x -= width / 2;
  if (align == Align::right) at.x -= width;
  cv::putText(img, s, at, kFont, scale, c, 1, cv::LINE_AA);
}

// Ticks at 1, 2 or 5 x 10^k covering [lo, hi], about `want` of them.
std::vector<double> nice_ticks(double lo, double hi, int want = 5) {
  const double raw = (hi - lo) / want, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

// A data rectangle [x0, x1] x [y0, y1] mapped onto the pixel rectangle `box`, with grid and ticks.
struct Axes {
  cv::Rect box;
  double x0, x1, y0, y1;

  cv::Point at(double x, double y) const {
    return {box.x + int(std::lround((x - x0) / (x1 - x0) * box.width)),
            box.y + box.height - int(std::lround((y - y0) / (y1 - y0) * box.height))};
  }
  void draw(cv::Mat& img, bool x_ticks) const {
    for (double v : nice_ticks(y0, y1)) {
      const cv::Point p = at(x0, v);
      cv::line(img, p, {box.x + box.width, p.y}, kGrid);
      text(img, fmt(v), {box.x - 6, p.y + 4}, 0.4, kBlack, Align::right);
    }
    if (x_ticks)
      for (double v : nice_ticks(x0, x1)) {
        const cv::Point p = at(v, y0);
        cv::line(img, p, {p.x, box.y}, kGrid);
        text(img, fmt(v), {p.x, box.y + box.height + 16}, 0.4, kBlack, Align::centre);
      }
    cv::rectangle(img, box, kAxis);
  }
};

// Widens a degenerate range and pads it by 5 %.
void pad_range(double& lo, double& hi) {
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    lo -= 0.5 * std::max(1e-6, std::fabs(lo));
    hi += 0.5 * std::max(1e-6, std::fabs(hi));
  }
  const double pad = 0.05 * (hi - lo);
  lo -= pad;
  hi += pad;
}

void write_png(const std::string& path, const cv::Mat& img) {
  bool ok = false;
  try {
    ok = cv::imwrite(path, img);
  } catch (const cv::Exception& e) {
    MS_FAIL("cannot write plot '", path, "': ", e.what(), "; use a .png path in a writable directory");
  }
  if (!ok) MS_FAIL("cannot write plot '", path, "'; use a .png path in a writable directory");
}

}  // namespace

void plot_lines(const std::string& path, const std::string& title, const std::string& x_label,
                const std::string& y_label, const std::vector<PlotSeries>& series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      }
  if (!(x0 <= x1)) MS_FAIL("nothing to plot into '", path, "': no finite points");
  if (x1 == x0) x1 = x0 + 1;
  pad_range(y0, y1);
  cv::Mat img(560, 900, CV_8UC3, kWhite);  // [h, w] BGR
  const Axes ax{cv::Rect(90, 50, 780, 440), x0, x1, y0, y1};
  ax.draw(img, true);
  text(img, title, {450, 30}, 0.6, kBlack, Align::centre);
  text(img, x_label, {450, 540}, 0.5, kBlack, Align::centre);
  text(img, y_label, {10, 30}, 0.5);
  for (size_t k = 0; k < series.size(); ++k) {
    std::vector<cv::Point> pts;  // [n] in pixels
    for (size_t i = 0; i < series[k].x.size(); ++i)
      if (std::isfinite(series[k].x[i]) && std::isfinite(series[k].y[i]))
        pts.push_back(ax.at(series[k].x[i], series[k].y[i]));
    if (pts.size() == 1) cv::circle(img, pts[0], 3, colour(k), cv::FILLED, cv::LINE_AA);
    cv::polylines(img, pts, false, colour(k), 2, cv::LINE_AA);
    const cv::Point key(ax.box.x + ax.box.width - 250, ax.box.y + 20 + 20 * int(k));
    cv::line(img, key, key + cv::Point(24, 0), colour(k), 3, cv::LINE_AA);
    text(img, series[k].label, key + cv::Point(32, 5), 0.45);
  }
  write_png(path, img);
}

void plot_bars(const std::string& path, const std::vector<std::string>& items, const std::vector<BarPanel>& panels) {
  MS_CHECK(!items.empty() && !panels.empty(), "plot_bars needs items and panels");
  const int cols = int(std::min<size_t>(3, panels.size())),
            rows = int((panels.size() + size_t(cols) - 1) / size_t(cols));
  const int pw = 380, ph = 280, legend = 24 * int(items.size()) + 20;
  cv::Mat img(rows * ph + legend, cols * pw, CV_8UC3, kWhite);  // [h, w] BGR
  for (size_t p = 0; p < panels.size(); ++p) {
    const BarPanel& panel = panels[p];
    MS_CHECK(panel.values.size() == items.size(), "panel '", panel.title, "' has ", panel.values.size(), " values for ",
             items.size(), " items");
    double lo = 0, hi = 0;  // bars grow from zero
    for (double v : panel.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    pad_range(lo, hi);
    hi += 0.1 * (hi - lo);  // room for the value above the tallest bar
    const cv::Point origin(int(p % size_t(cols)) * pw, int(p / size_t(cols)) * ph);
    const Axes ax{cv::Rect(origin.x + 80, origin.y + 40, pw - 100, ph - 70), -0.5, double(items.size()) - 0.5, lo, hi};
    ax.draw(img, false);
    text(img, panel.title, {origin.x + pw / 2 + 30, origin.y + 24}, 0.5, kBlack, Align::centre);
    const double half = 0.35;
    for (size_t i = 0; i < items.size(); ++i) {
      const double v = panel.values[i];
      if (!std::isfinite(v)) {
        text(img, "n/a", ax.at(double(i), 0.5 * (lo + hi)), 0.4, kAxis, Align::centre);
        continue;
      }
      cv::rectangle(img, cv::Rect(ax.at(double(i) - half, std::max(v, 0.0)), ax.at(double(i) + half, std::min(v, 0.0))),
                    colour(i), cv::FILLED);
      text(img, fmt(v), ax.at(double(i), v) + cv::Point(0, v >= 0 ? -5 : 15), 0.4, kBlack, Align::centre);
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const int y = rows * ph + 14 + 24 * int(i);
    cv::rectangle(img, cv::Rect(20, y - 10, 14, 14), colour(i), cv::FILLED);
    text(img, items[i], {44, y + 2}, 0.45);
  }
  write_png(path, img);
}

ImageSize plot_contact_sheet(const std::string& path, const std::vector<RgbVideo>& clips,
                             const std::vector<std::string>& captions) {
  MS_CHECK(!clips.empty() && clips.size() == captions.size(), "a contact sheet needs one caption per clip, got ",
           clips.size(), " clips and ", captions.size(), " captions");
  constexpr int kMinFrame = 72, kGap = 2, kPad = 6, kCaption = 20;
  auto zoom = [](const RgbVideo& v) { return int(std::max<int64_t>(1, (kMinFrame + v.height - 1) / v.height)); };
  int width = 0, height = kPad;
  for (size_t i = 0; i < clips.size(); ++i) {
    const RgbVideo& v = clips[i];
    MS_CHECK(v.frames > 0 && v.height > 0 && v.width > 0, "an empty clip cannot go on a contact sheet");
    int base = 0;
    const int text_width = cv::getTextSize(captions[i], kFont, 0.45, 1, &base).width;
    width = std::max({width, int(v.frames) * (int(v.width) * zoom(v) + kGap) - kGap, text_width});
    height += kCaption + int(v.height) * zoom(v) + kPad;
  }
  cv::Mat sheet(height, width + 2 * kPad, CV_8UC3, kWhite);
  int y = kPad;
  for (size_t i = 0; i < clips.size(); ++i) {
    const RgbVideo& v = clips[i];
    const int z = zoom(v);
    text(sheet, captions[i], {kPad, y + kCaption - 6});
    y += kCaption;
    for (int64_t f = 0; f < v.frames; ++f) {
      // The frame's RGB bytes as an OpenCV image (BGR order), enlarged in place on the sheet.
      cv::Mat rgb(int(v.height), int(v.width), CV_8UC3, const_cast<uint8_t*>(v.frame(f))), bgr;
      cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
      const cv::Rect at(kPad + int(f) * (int(v.width) * z + kGap), y, int(v.width) * z, int(v.height) * z);
      cv::resize(bgr, sheet(at), at.size(), 0, 0, cv::INTER_NEAREST);
    }
    y += int(v.height) * z + kPad;
  }
  write_png(path, sheet);
  return {sheet.cols, sheet.rows};
}

}  // namespace ms
