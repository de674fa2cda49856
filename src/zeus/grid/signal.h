// The grid's signal: what a joule costs right now, as carbon intensity (gCO2eq/kWh) or as the
// price of electricity ($/kWh), from a trace file or a provider's API (grid/*.h). The rule that
// follows it is pure and lives in optimize/grid_rule.h.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace zeus::grid {

enum class SignalKind {
  kCarbonIntensity,   // gCO2eq/kWh
  kElectricityPrice,  // $/kWh
};
// "carbon intensity" / "electricity price".
std::string_view to_string(SignalKind kind);
// "gCO2eq/kWh" / "$/kWh".
std::string_view unit(SignalKind kind);
// What one joule at `signal` amounts to: grams of CO2eq or dollars (J / 3.6e6 kWh x signal).
inline double amount_of(double energy_j, double signal) {
  return energy_j / 3.6e6 * signal;
}

using Clock = std::chrono::system_clock;

// One reading of a provider.
struct SignalReading {
  double value = 0;
  // The time the value is for (the row's hour, the API's `datetime`).
  Clock::time_point valid_from;
  // The provider's forecast of the mean over the next interval (from `now`, as long as the
  // poller's forecast horizon), where it has one: a trace whose rows reach that far (day-ahead
  // prices, a forecast export). std::nullopt: the rule goes by `value`.
  std::optional<double> forecast;
  // The grid's own reference (Note [grid reference] in optimize/grid_rule.h): the mean over the
  // last day where the provider knows its history, else over the next day where it forecasts
  // it, else the mean of the readings so far (grid/poller.h). Set by the poller.
  std::optional<double> reference;
};

// How far back (and, for a forecast, ahead) the grid's own reference looks.
inline constexpr Clock::duration kReferenceWindow = std::chrono::hours(24);

// Contract: read() gives the value in force at `now` or throws (IoError: unreachable, a timeout,
// a status other than 200; ConfigError: a reply or file that is not what the provider reads),
// naming the source. May block for the provider's timeout: callers that must not block (a
// training step) read through SignalPoller (poller.h). Not thread-safe.
class SignalProvider {
 public:
  virtual ~SignalProvider() = default;
  virtual SignalKind kind() const = 0;
  // For log lines: "trace /data/ci.csv", "ElectricityMaps at https://... (lat,lon)".
  virtual std::string describe() const = 0;
  virtual SignalReading read(Clock::time_point now) = 0;
  // The mean over [from, from + horizon) where the provider knows it ahead, else std::nullopt
  // (the default: a provider of the present only). Throws as read().
  virtual std::optional<double> forecast(Clock::time_point /*from*/, Clock::duration /*horizon*/) {
    return std::nullopt;
  }
  // The mean over the part of [to - window, to) the provider knows of the past (its history), or
  // std::nullopt (the default: a provider without one, or nothing before `to`). Throws as
  // read().
  virtual std::optional<double> history_mean(Clock::time_point /*to*/, Clock::duration /*window*/) {
    return std::nullopt;
  }
};

// ISO 8601 in UTC as ElectricityMaps and its CSV exports write it: "2024-09-24T03:00:00.000Z",
// "2022-10-20T06:20:00+00:00", "2024-09-24 03:00:00", "2024-09-24T03:00" (offsets applied;
// no zone means UTC). std::nullopt when it does not parse.
std::optional<Clock::time_point> parse_iso8601(std::string_view text);
// "2024-09-24T03:00:00Z".
std::string format_iso8601(Clock::time_point t);

}  // namespace zeus::grid
