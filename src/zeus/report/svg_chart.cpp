#include "zeus/report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace zeus::report {

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// "Nice" axis ticks covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int want = 5) {
  if (!(hi > lo)) {
    hi = lo + 1;
  }
  const double raw = (hi - lo) / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return out;
}

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                         "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

}  // namespace

std::string render(const Chart& c, int width, int height) {
  const double ml = 64, mr = 16, mt = 28, mb = 42;
  double x0 = INFINITY, x1 = -INFINITY, y0 = c.y_from_zero ? 0 : INFINITY, y1 = -INFINITY;
  for (const auto& s : c.series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (!std::isfinite(x0)) {
    return "<p><em>no data</em></p>";
  }
  if (x1 == x0) {
    x1 = x0 + 1;
  }
  if (y1 <= y0) {
    y1 = y0 + 1;
  }
  y1 += (y1 - y0) * 0.05;
  const double pw = width - ml - mr, ph = height - mt - mb;
  auto sx = [&](double x) { return ml + (x - x0) / (x1 - x0) * pw; };
  auto sy = [&](double y) { return mt + ph - (y - y0) / (y1 - y0) * ph; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{}\" y=\"16\" font-size=\"13\" "
      "font-weight=\"bold\">{}</text>\n",
      width, height, ml, esc(c.title));
  for (const auto& [a, b] : c.shaded) {
    const double l = sx(std::max(a, x0)), r = sx(std::min(b, x1));
    if (r > l) {
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fdd49e\" "
          "fill-opacity=\"0.5\"/>\n",
          l, mt, r - l, ph);
    }
  }
  for (double t : ticks(y0, y1)) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text "
        "x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
        ml, ml + pw, sy(t), sy(t), ml - 4, sy(t) + 4, t);
  }
  for (double t : ticks(x0, x1, 8)) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\"/><text "
        "x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>\n",
        sx(t), sx(t), mt + ph, mt + ph + 4, sx(t), mt + ph + 16, t);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n"
      "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(14,{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      ml, mt, pw, ph, ml + pw / 2, height - 6, esc(c.x_label), mt + ph / 2, esc(c.y_label));
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    const char* color = kColors[i % 8];
    std::string pts;
    for (const auto& [x, y] : s.points) {
      pts += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
    }
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n", color, pts);
    if (s.markers) {
      for (const auto& [x, y] : s.points) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", sx(x),
                           sy(y), color);
      }
    }
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"3\" fill=\"{}\"/><text x=\"{:.1f}\" "
        "y=\"{:.1f}\">{}</text>\n",
        ml + pw - 150, mt + 10 + 14.0 * static_cast<double>(i), color, ml + pw - 136,
        mt + 14 + 14.0 * static_cast<double>(i), esc(s.label));
  }
  if (c.highlight) {
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"7\" fill=\"none\" stroke=\"#d62728\" "
        "stroke-width=\"2\"/><text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\">{}</text>\n",
        sx(c.highlight->first), sy(c.highlight->second), sx(c.highlight->first) + 9,
        sy(c.highlight->second) - 9, esc(c.highlight_label));
  }
  return svg + "</svg>\n";
}

}  // namespace zeus::report
