// Prometheus's text exposition format 0.0.4 (what Prometheus scrapes and the Pushgateway takes):
// metric families as plain values, rendered with their `# HELP` and `# TYPE` lines even when a
// family has no series, so a dashboard's query names a declared metric from the first scrape on.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zeus::metrics {

inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kGauge, kCounter, kHistogram, kUntyped };

using Labels = std::vector<std::pair<std::string, std::string>>;

// One line: the family's name plus `suffix` ("_bucket", "_sum", "_count" for histograms; empty
// otherwise), its labels in order, and the value (NaN and infinities written as Prometheus
// spells them).
struct Sample {
  Labels labels;
  double value = 0;
  std::string suffix;
};

// A family. `name` is the full sample name (counters end in `_total`, which the 0.0.4 format
// keeps on the `# TYPE` line too). Names and label names must match Prometheus's grammar
// ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without ':'); render() throws ConfigError otherwise.
struct Family {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Sample> samples;

  Family& add(Labels labels, double value);
};

// The exposition of `families` in order. Label values are escaped (backslash, quote, newline),
// help text too (backslash, newline).
std::string render(const std::vector<Family>& families);

// Whether `name` is a valid metric name (`label`: a valid label name).
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

// A value as Prometheus writes it: shortest round-trip decimal, "NaN", "+Inf", "-Inf".
std::string format_value(double value);

}  // namespace zeus::metrics
