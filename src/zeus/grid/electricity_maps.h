// ElectricityMaps' v3 carbon-intensity API as Zeus 0.16's ElectrictyMapsClient reads it:
// GET <base>/carbon-intensity/latest?lat=..&lon=..&disableEstimations=..&emissionFactorType=..
// -> `carbonIntensity` (gCO2eq/kWh) and `datetime`; a status other than 200 carries
// `{"error": "..."}`. Beyond upstream: the base URL is configurable (ZEUS_ELECTRICITYMAPS_URL),
// and an `auth-token` header is sent when a token is given (ZEUS_ELECTRICITYMAPS_TOKEN).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "zeus/grid/signal.h"

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
  // The request URL of the latest value.
  std::string latest_url() const;

 private:
  ElectricityMapsOptions options_;
  std::unique_ptr<http_client::Client> client_;
};

}  // namespace zeus::grid
