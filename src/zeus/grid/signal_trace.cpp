#include "zeus/grid/signal_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "zeus/common/atomic_file.h"
#include "zeus/common/csv.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::grid {

std::string_view to_string(SignalKind kind) {
  return kind == SignalKind::kCarbonIntensity ? "carbon intensity" : "electricity price";
}

std::string_view unit(SignalKind kind) {
  return kind == SignalKind::kCarbonIntensity ? "gCO2eq/kWh" : "$/kWh";
}

namespace {

// Reads `digits` decimal digits at `pos` (advancing it); nullopt when they are not there.
std::optional<int> digits_at(std::string_view text, size_t& pos, size_t digits) {
  if (pos + digits > text.size()) {
    return std::nullopt;
  }
  int v = 0;
  for (size_t i = 0; i < digits; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    v = v * 10 + (c - '0');
  }
  pos += digits;
  return v;
}

bool expect(std::string_view text, size_t& pos, char c) {
  if (pos < text.size() && text[pos] == c) {
    ++pos;
    return true;
  }
  return false;
}

}  // namespace

std::optional<Clock::time_point> parse_iso8601(std::string_view text) {
  using namespace std::chrono;
  size_t pos = 0;
  const auto y = digits_at(text, pos, 4);
  if (!y || !expect(text, pos, '-'))
    return std::nullopt;
  const auto mo = digits_at(text, pos, 2);
  if (!mo || !expect(text, pos, '-'))
    return std::nullopt;
  const auto d = digits_at(text, pos, 2);
  if (!d)
    return std::nullopt;
  const year_month_day date{year{*y}, month{static_cast<unsigned>(*mo)},
                            day{static_cast<unsigned>(*d)}};
  if (!date.ok())
    return std::nullopt;
  nanoseconds time_of_day{0};
  if (pos < text.size() && (text[pos] == 'T' || text[pos] == ' ')) {
    ++pos;
    const auto h = digits_at(text, pos, 2);
    if (!h || *h > 23 || !expect(text, pos, ':'))
      return std::nullopt;
    const auto mi = digits_at(text, pos, 2);
    if (!mi || *mi > 59)
      return std::nullopt;
    int s = 0;
    int64_t frac_ns = 0;
    if (expect(text, pos, ':')) {
      const auto sec = digits_at(text, pos, 2);
      if (!sec || *sec > 60)
        return std::nullopt;
      s = *sec;
      if (expect(text, pos, '.')) {
        int64_t scale = 100'000'000;
        size_t n = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
          if (scale > 0) {
            frac_ns += (text[pos] - '0') * scale;
            scale /= 10;
          }
          ++pos;
          ++n;
        }
        if (n == 0)
          return std::nullopt;
      }
    }
    time_of_day = hours{*h} + minutes{*mi} + seconds{s} + nanoseconds{frac_ns};
    // The zone: Z, +HH:MM, -HH:MM, +HHMM, or none (UTC).
    if (pos < text.size()) {
      if (text[pos] == 'Z' || text[pos] == 'z') {
        ++pos;
      } else if (text[pos] == '+' || text[pos] == '-') {
        const int sign = text[pos] == '+' ? 1 : -1;
        ++pos;
        const auto oh = digits_at(text, pos, 2);
        if (!oh)
          return std::nullopt;
        expect(text, pos, ':');
        const auto om = digits_at(text, pos, 2);
        if (!om)
          return std::nullopt;
        // Local = UTC + offset, so UTC = local - offset.
        time_of_day -= sign * (hours{*oh} + minutes{*om});
      }
    }
  }
  if (pos != text.size())
    return std::nullopt;
  return Clock::time_point{
      duration_cast<Clock::duration>(sys_days{date}.time_since_epoch() + time_of_day)};
}

std::string format_iso8601(Clock::time_point t) {
  using namespace std::chrono;
  const auto secs = floor<seconds>(t);
  const auto day_point = floor<days>(secs);
  const year_month_day date{day_point};
  const hh_mm_ss hms{secs - day_point};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

namespace {

std::optional<size_t> find_column(const CsvTable& table, SignalKind kind, bool time) {
  const auto& header = table.header();
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string name = to_lower(trim(header[i]));
    if (time ? (name == "datetime" || name == "datetime (utc)")
             : (kind == SignalKind::kCarbonIntensity
                    ? (name == "carbonintensity" || name.starts_with("carbon intensity"))
                    : (name == "price_per_kwh"))) {
      return i;
    }
  }
  return std::nullopt;
}

double checked_value(double v, std::string_view where) {
  if (!std::isfinite(v) || v < 0) {
    throw ConfigError(fmt::format("{}: the value {} is not a number >= 0", where, v));
  }
  return v;
}

Clock::time_point checked_time(std::string_view text, std::string_view where) {
  const auto t = parse_iso8601(text);
  if (!t) {
    throw ConfigError(
        fmt::format("{}: '{}' is not an ISO 8601 time (write 2024-09-24T03:00:00Z)", where, text));
  }
  return *t;
}

std::vector<SignalPoint> parse_csv(std::string_view text, std::string_view source,
                                   SignalKind kind) {
  const CsvTable table = CsvTable::parse(text, source);
  const auto time_col = find_column(table, kind, true);
  const auto value_col = find_column(table, kind, false);
  if (!time_col || !value_col) {
    throw ConfigError(fmt::format(
        "{}: a {} trace needs the columns datetime and {} (found: {})", source, to_string(kind),
        kind == SignalKind::kCarbonIntensity ? "carbonIntensity" : "price_per_kwh",
        fmt::join(table.header(), ",")));
  }
  std::vector<SignalPoint> points;
  for (size_t r = 0; r < table.rows().size(); ++r) {
    const std::string where = fmt::format("{}: row {}", source, r + 1);
    points.push_back({checked_time(trim(table.rows()[r][*time_col]), where),
                      checked_value(table.as_double(r, *value_col), where)});
  }
  return points;
}

SignalPoint json_point(const nlohmann::json& entry, const std::string& where) {
  if (!entry.is_object() || !entry.contains("datetime") || !entry["datetime"].is_string()) {
    throw ConfigError(fmt::format("{}: no \"datetime\" string", where));
  }
  const auto& v = entry.contains("carbonIntensity") ? entry["carbonIntensity"] : entry["value"];
  if (!v.is_number()) {
    throw ConfigError(fmt::format("{}: \"carbonIntensity\" is {}, expected a number", where,
                                  v.is_null() ? "missing or null" : v.dump()));
  }
  return {checked_time(entry["datetime"].get<std::string>(), where),
          checked_value(v.get<double>(), where)};
}

std::vector<SignalPoint> parse_json(std::string_view text, std::string_view source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not JSON: {}", source, e.what()));
  }
  if (doc.is_object() && doc.contains("error")) {
    throw ConfigError(fmt::format("{}: ElectricityMaps says: {}", source, doc["error"].dump()));
  }
  std::vector<SignalPoint> points;
  const char* list = !doc.is_object()           ? nullptr
                     : doc.contains("history")  ? "history"
                     : doc.contains("forecast") ? "forecast"
                                                : nullptr;
  if (list != nullptr) {
    if (!doc[list].is_array()) {
      throw ConfigError(fmt::format("{}: \"{}\" is not a list", source, list));
    }
    for (size_t i = 0; i < doc[list].size(); ++i) {
      points.push_back(json_point(doc[list][i], fmt::format("{}: {}[{}]", source, list, i)));
    }
  } else {
    points.push_back(json_point(doc, std::string(source)));
  }
  return points;
}

}  // namespace

SignalTrace SignalTrace::parse(std::string_view text, std::string_view source, SignalKind kind) {
  SignalTrace trace;
  trace.kind_ = kind;
  trace.source_ = source;
  const std::string_view body = trim(text);
  if (!body.empty() && body.front() == '{') {
    if (kind != SignalKind::kCarbonIntensity) {
      throw ConfigError(fmt::format(
          "{}: a price trace is CSV (datetime,price_per_kwh); JSON is ElectricityMaps' carbon "
          "intensity",
          source));
    }
    trace.points_ = parse_json(body, source);
  } else {
    trace.points_ = parse_csv(text, source, kind);
  }
  if (trace.points_.empty()) {
    throw ConfigError(fmt::format("{}: the trace has no rows", source));
  }
  std::sort(trace.points_.begin(), trace.points_.end(),
            [](const SignalPoint& a, const SignalPoint& b) { return a.at < b.at; });
  for (size_t i = 1; i < trace.points_.size(); ++i) {
    if (trace.points_[i].at == trace.points_[i - 1].at) {
      throw ConfigError(
          fmt::format("{}: two rows for {}", source, format_iso8601(trace.points_[i].at)));
    }
  }
  return trace;
}

SignalTrace SignalTrace::load(const std::filesystem::path& path, SignalKind kind) {
  return parse(read_file(path), path.string(), kind);
}

const SignalPoint& SignalTrace::at(Clock::time_point t) const {
  auto it = std::upper_bound(points_.begin(), points_.end(), t,
                             [](Clock::time_point v, const SignalPoint& p) { return v < p.at; });
  return it == points_.begin() ? points_.front() : *std::prev(it);
}

std::optional<double> SignalTrace::mean_over(Clock::time_point from,
                                             Clock::duration horizon) const {
  const Clock::time_point to = from + horizon;
  if (horizon <= Clock::duration::zero() || from < points_.front().at ||
      to > points_.back().at + step()) {
    return std::nullopt;
  }
  // Offsets from the first row's value, so that rows of one value average to it exactly.
  auto it = std::upper_bound(points_.begin(), points_.end(), from,
                             [](Clock::time_point v, const SignalPoint& p) { return v < p.at; });
  --it;
  const double base = it->value;
  double weighted = 0;
  for (Clock::time_point t = from; t < to; ++it) {
    const Clock::time_point end =
        std::next(it) == points_.end() ? to : std::min(to, std::next(it)->at);
    weighted += (it->value - base) * std::chrono::duration<double>(end - t).count();
    t = end;
  }
  return base + weighted / std::chrono::duration<double>(horizon).count();
}

std::optional<double> SignalTrace::history_mean(Clock::time_point to,
                                                Clock::duration window) const {
  const Clock::time_point from = std::max(to - window, points_.front().at);
  const Clock::time_point end = std::min(to, points_.back().at + step());
  if (end <= from) {
    return std::nullopt;
  }
  return mean_over(from, end - from);
}

SignalTrace SignalTrace::with_leading(SignalPoint before) const {
  SignalTrace t = *this;
  if (before.at < t.points_.front().at) {
    t.points_.insert(t.points_.begin(), before);
  }
  return t;
}

Clock::duration SignalTrace::step() const {
  if (points_.size() < 2) {
    return std::chrono::hours(1);
  }
  return points_.back().at - points_[points_.size() - 2].at;
}

Clock::duration SignalTrace::span() const {
  return points_.back().at - points_.front().at + step();
}

double SignalTrace::mean() const {
  double sum = 0;
  for (const auto& p : points_) {
    sum += p.value;
  }
  return sum / static_cast<double>(points_.size());
}

double SignalTrace::max() const {
  double m = 0;
  for (const auto& p : points_) {
    m = std::max(m, p.value);
  }
  return m;
}

TraceProvider::TraceProvider(std::filesystem::path path, SignalKind kind)
    : path_(std::move(path)), kind_(kind), trace_(SignalTrace::load(path_, kind)) {
  std::error_code ec;
  mtime_ = std::filesystem::last_write_time(path_, ec);
  size_ = std::filesystem::file_size(path_, ec);
}

std::string TraceProvider::describe() const {
  return fmt::format("the {} trace {}", to_string(kind_), path_.string());
}

void TraceProvider::reload_if_changed() {
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path_, ec);
  if (ec) {
    throw IoError(fmt::format("{}: cannot stat: {}", path_.string(), ec.message()));
  }
  const auto size = std::filesystem::file_size(path_, ec);
  if (mtime == mtime_ && size == size_) {
    return;
  }
  trace_ = SignalTrace::load(path_, kind_);  // throws: the old trace stays
  mtime_ = mtime;
  size_ = size;
}

SignalReading TraceProvider::read(Clock::time_point now) {
  reload_if_changed();
  const SignalPoint& p = trace_.at(now);
  return SignalReading{p.value, p.at, std::nullopt};
}

std::optional<double> TraceProvider::forecast(Clock::time_point from, Clock::duration horizon) {
  reload_if_changed();
  return trace_.mean_over(from, horizon);
}

std::optional<double> TraceProvider::history_mean(Clock::time_point to, Clock::duration window) {
  reload_if_changed();
  return trace_.history_mean(to, window);
}

}  // namespace zeus::grid
