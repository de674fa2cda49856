// Parsing and printing the units users type: durations ("100ms", "10s") and UTC timestamps.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace zeus {

// Parses "<number><unit>" with unit ns, us, ms, s, m or h ("1.5s", "100ms"); "0" alone is zero.
// Throws ConfigError naming `what` (e.g. "--interval") and the value when it does not parse or
// is negative.
std::chrono::nanoseconds parse_duration(std::string_view text, std::string_view what);

// "250ms", "3s", "1.5s", "2m": the shortest exact-ish human form.
std::string format_duration(std::chrono::nanoseconds d);

// UTC "YYYY-MM-DD HH:MM:SS.nnnnnnnnn", the timestamp format of Zeus's power logs.
std::string format_utc_ns(std::chrono::system_clock::time_point t);

// Parses format_utc_ns()'s form (fraction optional, 1-9 digits) into nanoseconds since the Unix
// epoch; std::nullopt when it does not parse.
std::optional<int64_t> parse_utc_ns(std::string_view text);

// One row of Zeus's power-log CSV (header kPowerLogHeader): "<format_utc_ns>,<mW>\n". Written
// by monitor::PowerMonitor, read by contract::read_power_log.
inline constexpr std::string_view kPowerLogHeader = "Time,Power\n";
std::string power_log_row(std::chrono::system_clock::time_point t, int64_t power_mw);
// (UTC ns since the Unix epoch, mW), or std::nullopt when `line` (without its newline) is not
// such a row.
std::optional<std::pair<int64_t, int64_t>> parse_power_log_row(std::string_view line);

// Milliseconds since the Unix epoch (zeusd's and upstream's "timestamp_ms").
inline int64_t unix_time_ms(
    std::chrono::system_clock::time_point t = std::chrono::system_clock::now()) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Seconds as a double, for printing and for formulas that need it (cost, energy).
inline double to_seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace zeus
