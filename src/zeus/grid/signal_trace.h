// A signal over time from a file: hourly (or any step) carbon intensity or price, for machines
// without internet, for tests and for the simulator.
//
// Formats (told apart by the first character):
// - CSV with a header: a time column (`datetime`, or ElectricityMaps' export's `Datetime (UTC)`)
//   and a value column (carbon: `carbonIntensity`, or the export's first `Carbon Intensity
//   gCO2eq/kWh ...` column; price: `price_per_kwh`). Other columns are ignored.
// - ElectricityMaps' JSON: a `carbon-intensity/history` reply (`{"history": [{"datetime",
//   "carbonIntensity"}, ...]}`), a `forecast` one (the same rows under "forecast") or a
//   `latest` one (one object).
// Rows may come in any order; they are sorted and must have distinct times.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/grid/signal.h"

namespace zeus::grid {

struct SignalPoint {
  Clock::time_point at;
  double value = 0;
};

class SignalTrace {
 public:
  // Throws ConfigError naming `source` (and the line or entry) when the text is not a trace of
  // `kind`: no rows, a missing column, a bad time or value, a negative value, a repeated time.
  static SignalTrace parse(std::string_view text, std::string_view source, SignalKind kind);
  // Throws IoError when the file cannot be read, then as parse().
  static SignalTrace load(const std::filesystem::path& path, SignalKind kind);

  SignalKind kind() const { return kind_; }
  const std::string& source() const { return source_; }
  // Ascending by time, at least one.
  const std::vector<SignalPoint>& points() const { return points_; }
  // The row in force at `t`: the last one at or before it (the first before the trace begins).
  const SignalPoint& at(Clock::time_point t) const;
  // The time-weighted mean of the rows in force over [from, from + horizon), or std::nullopt
  // when the trace does not reach that far (its last row ends at its time plus step()), begins
  // after `from`, or the horizon is not positive.
  std::optional<double> mean_over(Clock::time_point from, Clock::duration horizon) const;
  // The time-weighted mean over the part of [to - window, to) the rows cover (the trace's
  // history of the window before `to`), or std::nullopt where they cover none of it.
  std::optional<double> history_mean(Clock::time_point to, Clock::duration window) const;
  // This trace with `before` as its first row where it is earlier than the first: a forecast
  // that begins at the next hour, led by the value now.
  SignalTrace with_leading(SignalPoint before) const;
  // The trace's step: the last two rows' distance (one hour for a single row).
  Clock::duration step() const;
  // First row's time to the last row's end (its time plus step()).
  Clock::duration span() const;
  // Mean of the values.
  double mean() const;
  double max() const;

 private:
  SignalKind kind_ = SignalKind::kCarbonIntensity;
  std::string source_;
  std::vector<SignalPoint> points_;
};

// A provider over a trace file. The file is read again when it changes (its modification time
// or size), so a cron job that rewrites it feeds a running job; the value is the row of `now`.
class TraceProvider final : public SignalProvider {
 public:
  // Reads the file now: throws as SignalTrace::load.
  TraceProvider(std::filesystem::path path, SignalKind kind);
  SignalKind kind() const override { return kind_; }
  std::string describe() const override;
  SignalReading read(Clock::time_point now) override;
  // The trace's mean over the horizon where its rows reach that far (SignalTrace::mean_over).
  std::optional<double> forecast(Clock::time_point from, Clock::duration horizon) override;
  // The trace's time-weighted mean over the part of [to - window, to) its rows cover.
  std::optional<double> history_mean(Clock::time_point to, Clock::duration window) override;
  const SignalTrace& trace() const { return trace_; }

 private:
  void reload_if_changed();

  std::filesystem::path path_;
  SignalKind kind_;
  SignalTrace trace_;
  std::filesystem::file_time_type mtime_{};
  uintmax_t size_ = 0;
};

}  // namespace zeus::grid
