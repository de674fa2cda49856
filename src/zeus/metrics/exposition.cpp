#include "zeus/metrics/exposition.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/errors.h"

namespace zeus::metrics {

namespace {

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const bool digit = c >= '0' && c <= '9';
  return alpha || (colon && c == ':') || (!first && digit);
}

bool valid_name(std::string_view name, bool colon) {
  if (name.empty()) {
    return false;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon)) {
      return false;
    }
  }
  return true;
}

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kUntyped:
      break;
  }
  return "untyped";
}

void append_escaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

Family& Family::add(Labels labels, double value) {
  samples.push_back(Sample{std::move(labels), value, {}});
  return *this;
}

bool valid_metric_name(std::string_view name) {
  return valid_name(name, true);
}
bool valid_label_name(std::string_view name) {
  return valid_name(name, false);
}

std::string format_value(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  return fmt::format("{}", value);
}

std::string render(const std::vector<Family>& families) {
  std::string out;
  out.reserve(families.size() * 256);
  for (const Family& f : families) {
    if (!valid_metric_name(f.name)) {
      throw ConfigError(fmt::format("metric name '{}' is not a valid Prometheus name", f.name));
    }
    out += "# HELP ";
    out += f.name;
    out += ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE ";
    out += f.name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    for (const Sample& s : f.samples) {
      out += f.name;
      out += s.suffix;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          const auto& [key, value] = s.labels[i];
          if (!valid_label_name(key)) {
            throw ConfigError(
                fmt::format("label name '{}' of metric '{}' is not valid", key, f.name));
          }
          out += i == 0 ? "" : ",";
          out += key;
          out += "=\"";
          append_escaped(out, value, true);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      out += format_value(s.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace zeus::metrics
