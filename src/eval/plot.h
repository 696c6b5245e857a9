// Small PNG charts drawn with OpenCV (imgproc lines and Hershey text, imgcodecs to write): loss
// curves for `megaslide plot`, metric bars for `megaslide eval --plot`, the samples' contact sheets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/video.h"

namespace ms {

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;  // same length; non-finite points are skipped
};

// One chart, one coloured polyline per series, ticked axes and a legend. Throws ms::Error when
// there is nothing finite to draw or the image cannot be written (the extension picks the format).
void plot_lines(const std::string& path, const std::string& title, const std::string& x_label,
                const std::string& y_label, const std::vector<PlotSeries>& series);

struct BarPanel {
  std::string title;
  std::vector<double> values;  // one per item; NaN: no bar
};

// One small chart per panel (each with its own y scale), one bar per item in the item's colour with
// its value printed above, and a legend of items below.
void plot_bars(const std::string& path, const std::vector<std::string>& items, const std::vector<BarPanel>& panels);

struct ImageSize {
  int64_t width = 0, height = 0;
};

// A contact sheet: one row per clip, its caption above it and its frames left to right, each frame enlarged by
// the integer factor that makes it at least 72 pixels tall (nearest neighbour: the pixels stay sharp). Clips may
// differ in size. Returns the sheet's size; throws ms::Error when there is no clip or the PNG cannot be written.
ImageSize plot_contact_sheet(const std::string& path, const std::vector<RgbVideo>& clips,
                             const std::vector<std::string>& captions);

}  // namespace ms
