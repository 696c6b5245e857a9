// Small PNG charts drawn with OpenCV (imgproc lines and Hershey text, imgcodecs to write): loss
// curves for `megaslide plot`, metric bars for `megaslide eval --plot`.
#pragma once
#include <string>
#include <vector>

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

}  // namespace ms
