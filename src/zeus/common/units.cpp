#include "zeus/common/units.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <ctime>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus {

std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view what) {
  const auto bad = [&](std::string_view why) {
    return ConfigError(fmt::format("{} '{}' is not a valid duration: {}; write e.g. 100ms, 10s, 2m",
                                   what, text, why));
  };
  if (text == "0") {
    return std::chrono::nanoseconds{0};
  }
  size_t unit_pos = 0;
  while (unit_pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit_pos])) != 0 || text[unit_pos] == '.' ||
          text[unit_pos] == '-' || text[unit_pos] == '+')) {
    ++unit_pos;
  }
  const std::string_view number = text.substr(0, unit_pos);
  const std::string_view unit = text.substr(unit_pos);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || ptr != number.data() + number.size() ||
      !std::isfinite(value)) {
    throw bad("no number");
  }
  if (value < 0) {
    throw bad("negative");
  }
  double scale_ns = 0;
  if (unit == "ns") {
    scale_ns = 1;
  } else if (unit == "us") {
    scale_ns = 1e3;
  } else if (unit == "ms") {
    scale_ns = 1e6;
  } else if (unit == "s") {
    scale_ns = 1e9;
  } else if (unit == "m" || unit == "min") {
    scale_ns = 60e9;
  } else if (unit == "h") {
    scale_ns = 3600e9;
  } else if (unit.empty()) {
    throw bad("missing unit (ns, us, ms, s, m, h)");
  } else {
    throw bad(fmt::format("unknown unit '{}' (ns, us, ms, s, m, h)", unit));
  }
  const double ns = value * scale_ns;
  if (ns > 1e18) {
    throw bad("too long");
  }
  return std::chrono::nanoseconds{static_cast<int64_t>(std::llround(ns))};
}

std::string format_duration(std::chrono::nanoseconds d) {
  const int64_t ns = d.count();
  if (ns == 0) {
    return "0s";
  }
  if (ns % 1'000'000'000 == 0) {
    return fmt::format("{}s", ns / 1'000'000'000);
  }
  if (ns >= 1'000'000'000) {
    return fmt::format("{:.3g}s", static_cast<double>(ns) / 1e9);
  }
  if (ns % 1'000'000 == 0) {
    return fmt::format("{}ms", ns / 1'000'000);
  }
  if (ns >= 1'000'000) {
    return fmt::format("{:.3g}ms", static_cast<double>(ns) / 1e6);
  }
  if (ns % 1'000 == 0) {
    return fmt::format("{}us", ns / 1'000);
  }
  return fmt::format("{}ns", ns);
}

std::string format_utc_ns(std::chrono::system_clock::time_point t) {
  const auto ns_since_epoch =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ns_since_epoch / 1'000'000'000);
  int64_t frac = ns_since_epoch % 1'000'000'000;
  if (frac < 0) {
    frac += 1'000'000'000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:09}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

std::optional<int64_t> parse_utc_ns(std::string_view text) {
  // "YYYY-MM-DD HH:MM:SS[.fffffffff]"
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || text[10] != ' ' || text[13] != ':' ||
      text[16] != ':') {
    return std::nullopt;
  }
  const auto year = parse_number<int>(text.substr(0, 4));
  const auto month = parse_number<int>(text.substr(5, 2));
  const auto day = parse_number<int>(text.substr(8, 2));
  const auto hour = parse_number<int>(text.substr(11, 2));
  const auto minute = parse_number<int>(text.substr(14, 2));
  const auto second = parse_number<int>(text.substr(17, 2));
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  int64_t frac_ns = 0;
  if (text.size() > 19) {
    const std::string_view frac = text.substr(20);
    if (text[19] != '.' || frac.empty() || frac.size() > 9) {
      return std::nullopt;
    }
    const auto digits = parse_number<int64_t>(frac);
    if (!digits || *digits < 0) {
      return std::nullopt;
    }
    frac_ns = *digits;
    for (size_t i = frac.size(); i < 9; ++i) {
      frac_ns *= 10;
    }
  }
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const std::time_t secs = timegm(&tm);
  return static_cast<int64_t>(secs) * 1'000'000'000 + frac_ns;
}

std::string power_log_row(std::chrono::system_clock::time_point t, int64_t power_mw) {
  return fmt::format("{},{}\n", format_utc_ns(t), power_mw);
}

std::optional<std::pair<int64_t, int64_t>> parse_power_log_row(std::string_view line) {
  const size_t comma = line.find(',');
  if (comma == std::string_view::npos) {
    return std::nullopt;
  }
  const auto t = parse_utc_ns(line.substr(0, comma));
  const auto mw = parse_number<int64_t>(line.substr(comma + 1));
  if (!t || !mw) {
    return std::nullopt;
  }
  return std::pair{*t, *mw};
}

}  // namespace zeus
