// ElectricityMaps' v3 carbon-intensity API as Zeus 0.16's ElectrictyMapsClient reads it:
// GET <base>/carbon-intensity/latest?lat=..&lon=..&disableEstimations=..&emissionFactorType=..
// -> `carbonIntensity` (gCO2eq/kWh) and `datetime`; a status other than 200 carries
// `{"error": "..."}`. Beyond upstream: the base URL is configurable (ZEUS_ELECTRICITYMAPS_URL),
// an `auth-token` header is sent when a token is given (ZEUS_ELECTRICITYMAPS_TOKEN), and the
// rule's forecast comes from `carbon-intensity/forecast` (hourly rows under "forecast"; a paid
// plan's endpoint: a token without it is answered 401/403 and never asked again).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "zeus/grid/signal.h"
#include "zeus/grid/signal_trace.h"

namespace zeus::http_client {
class Client;
}

namespace zeus::grid {

inline constexpr std::string_view kElectricityMapsUrl = "https://api.electricitymap.org/v3";

struct ElectricityMapsOptions {
  std::string base_url{kElectricityMapsUrl};  // up to /v3, no trailing slash needed
  double latitude = 0;
  double longitude = 0;
  bool estimate = false;                        // upstream's: disableEstimations = !estimate
  std::string emission_factor_type = "direct";  // or "lifecycle"
  std::string token;                            // sent as auth-token when not empty
  std::chrono::milliseconds timeout{10'000};    // connect and total
  // A forecast is fetched again once it is this old (ElectricityMaps updates it hourly).
  std::chrono::minutes forecast_max_age{15};
  // The last day's history (the grid's own reference) is fetched again once it is this old.
  std::chrono::minutes history_max_age{60};
};

// "lat,lon" (e.g. "42.28,-83.74"); throws ConfigError naming `what` when it is not two numbers
// in range.
std::pair<double, double> parse_location(std::string_view text, std::string_view what);

class ElectricityMapsProvider final : public SignalProvider {
 public:
  // Throws ConfigError for a bad emission factor type.
  explicit ElectricityMapsProvider(ElectricityMapsOptions options);
  ~ElectricityMapsProvider() override;
  SignalKind kind() const override { return SignalKind::kCarbonIntensity; }
  std::string describe() const override;
  SignalReading read(Clock::time_point now) override;
  // The mean of ElectricityMaps' hourly forecast over [from, from + horizon), the value last
  // read leading it where its first row is the next hour. std::nullopt where it does not reach
  // that far, and for good once the API refused the forecast (401, 403, 404: thrown once, as
  // IoError, saying so). Throws as read() otherwise.
  std::optional<double> forecast(Clock::time_point from, Clock::duration horizon) override;
  // The mean of `carbon-intensity/history` (the last 24 hours, hourly) over the part of
  // [to - window, to) it covers, fetched at most once per history_max_age; refused for good as
  // the forecast is (401, 403, 404: thrown once).
  std::optional<double> history_mean(Clock::time_point to, Clock::duration window) override;
  // The request URL of the latest value.
  std::string latest_url() const;
  // The request URL of a forecast that covers `horizon` past a fetch, plus its reuse.
  std::string forecast_url(Clock::duration horizon) const;

 private:
  // GET `url` with the token; the body of a 200, else IoError naming the URL and what the API
  // said; `status` gets the status either way.
  std::string get(const std::string& url, long* status = nullptr);
  // GET `url` as a trace; a 401, 403 or 404 (the token's plan lacks the route) sets `refused`
  // and is thrown once with `refused_note` after the API's message.
  SignalTrace fetch_trace(const std::string& url, bool& refused, std::string_view refused_note);

  ElectricityMapsOptions options_;
  std::unique_ptr<http_client::Client> client_;
  std::optional<SignalPoint> latest_;  // the last value read, leading a forecast
  std::optional<SignalTrace> forecast_;
  Clock::time_point forecast_fetched_{};
  bool forecast_refused_ = false;
  std::optional<SignalTrace> history_;
  Clock::time_point history_fetched_{};
  bool history_refused_ = false;
};

}  // namespace zeus::grid
