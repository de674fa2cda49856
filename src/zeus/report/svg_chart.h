// A line chart as inline SVG, with no library: axes with "nice" ticks, one polyline per series
// (optionally with markers), shaded x ranges and one highlighted point. Used by report.cpp for
// the power timeline and the power-limit profile plots.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zeus::report {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;
  bool markers = false;
};

struct Chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<std::pair<double, double>> shaded;       // x ranges
  std::optional<std::pair<double, double>> highlight;  // one point, ringed in red
  std::string highlight_label;
  bool y_from_zero = true;
};

// The chart as one <svg> element of width x height pixels ("<p><em>no data</em></p>" when no
// series has a point).
std::string render(const Chart& chart, int width = 720, int height = 260);

// `s` with < > & " escaped for HTML text and attributes.
std::string esc(std::string_view s);

}  // namespace zeus::report
