#include "zeus/grid/electricity_maps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/grid/signal_trace.h"
#include "zeus/http_client/client.h"

namespace zeus::grid {

std::pair<double, double> parse_location(std::string_view text, std::string_view what) {
  const size_t comma = text.find(',');
  const auto lat =
      comma == std::string_view::npos ? std::nullopt : parse_number<double>(text.substr(0, comma));
  const auto lon =
      comma == std::string_view::npos ? std::nullopt : parse_number<double>(text.substr(comma + 1));
  if (!lat || !lon || !(std::abs(*lat) <= 90) || !(std::abs(*lon) <= 180)) {
    throw ConfigError(fmt::format(
        "{}='{}': expected latitude,longitude in degrees (e.g. 42.28,-83.74)", what, text));
  }
  return {*lat, *lon};
}

ElectricityMapsProvider::ElectricityMapsProvider(ElectricityMapsOptions options)
    : options_(std::move(options)) {
  if (options_.emission_factor_type != "direct" && options_.emission_factor_type != "lifecycle") {
    throw ConfigError(fmt::format("emission factor type '{}': choose direct or lifecycle",
                                  options_.emission_factor_type));
  }
  while (!options_.base_url.empty() && options_.base_url.back() == '/') {
    options_.base_url.pop_back();
  }
  http_client::ClientOptions client;
  client.connect_timeout = options_.timeout;
  client.total_timeout = options_.timeout;
  client.max_body_bytes = 256 * 1024;
  client_ = std::make_unique<http_client::Client>(client);
}

ElectricityMapsProvider::~ElectricityMapsProvider() = default;

std::string ElectricityMapsProvider::latest_url() const {
  return fmt::format(
      "{}/carbon-intensity/latest?lat={}&lon={}&disableEstimations={}&emissionFactorType={}",
      options_.base_url, options_.latitude, options_.longitude,
      options_.estimate ? "false" : "true", options_.emission_factor_type);
}

std::string ElectricityMapsProvider::describe() const {
  return fmt::format("ElectricityMaps at {} ({},{})", options_.base_url, options_.latitude,
                     options_.longitude);
}

std::string ElectricityMapsProvider::forecast_url(Clock::duration horizon) const {
  // The API offers these horizons; the forecast must cover the interval after its last reuse.
  const auto needed = std::chrono::ceil<std::chrono::hours>(horizon + options_.forecast_max_age);
  int hours = 72;
  for (int h : {6, 24, 48}) {
    if (needed.count() + 1 <= h) {
      hours = h;
      break;
    }
  }
  return fmt::format(
      "{}/carbon-intensity/forecast?lat={}&lon={}&horizonHours={}&emissionFactorType={}",
      options_.base_url, options_.latitude, options_.longitude, hours,
      options_.emission_factor_type);
}

std::string ElectricityMapsProvider::get(const std::string& url, long* status) {
  http_client::Request request;
  request.url = url;
  if (!options_.token.empty()) {
    request.headers.push_back("auth-token: " + options_.token);
  }
  const http_client::Reply reply = client_->perform(request);
  if (status != nullptr) {
    *status = reply.status;
  }
  if (reply.status != 200) {
    std::string said = reply.body.substr(0, 300);
    try {
      const auto doc = nlohmann::json::parse(reply.body);
      if (doc.is_object() && doc.contains("error")) {
        said = doc["error"].is_string() ? doc["error"].get<std::string>() : doc["error"].dump();
      }
    } catch (const nlohmann::json::exception&) {
    }
    throw IoError(fmt::format("{} answered {}: {}", url, reply.status, said));
  }
  return reply.body;
}

SignalTrace ElectricityMapsProvider::fetch_trace(const std::string& url, bool& refused,
                                                 std::string_view refused_note) {
  long status = 0;
  try {
    return SignalTrace::parse(get(url, &status), url, SignalKind::kCarbonIntensity);
  } catch (const IoError& e) {
    if (status == 401 || status == 403 || status == 404) {
      refused = true;  // this token's plan lacks the route: said once, never asked again
      throw IoError(fmt::format("{} {}", e.what(), refused_note));
    }
    throw;
  }
}

SignalReading ElectricityMapsProvider::read(Clock::time_point /*now*/) {
  const std::string url = latest_url();
  const SignalTrace one = SignalTrace::parse(get(url), url, SignalKind::kCarbonIntensity);
  latest_ = one.points().back();
  return {latest_->value, latest_->at, std::nullopt};
}

std::optional<double> ElectricityMapsProvider::forecast(Clock::time_point from,
                                                        Clock::duration horizon) {
  if (forecast_refused_ || horizon <= Clock::duration::zero()) {
    return std::nullopt;
  }
  const auto mean = [&]() -> std::optional<double> {
    if (!forecast_) {
      return std::nullopt;
    }
    return latest_ ? forecast_->with_leading(*latest_).mean_over(from, horizon)
                   : forecast_->mean_over(from, horizon);
  };
  const bool fresh = forecast_ && from >= forecast_fetched_ &&
                     from - forecast_fetched_ < options_.forecast_max_age;
  if (fresh) {
    if (auto m = mean()) {
      return m;
    }
  }
  forecast_.reset();
  forecast_ = fetch_trace(forecast_url(horizon), forecast_refused_,
                          "(the forecast is a paid plan's endpoint); it is not asked again in this "
                          "run");
  forecast_fetched_ = from;
  return mean();
}

std::optional<double> ElectricityMapsProvider::history_mean(Clock::time_point to,
                                                            Clock::duration window) {
  if (history_refused_ || window <= Clock::duration::zero()) {
    return std::nullopt;
  }
  if (!history_ || to < history_fetched_ || to - history_fetched_ >= options_.history_max_age) {
    history_.reset();
    history_ = fetch_trace(
        fmt::format(
            "{}/carbon-intensity/history?lat={}&lon={}&disableEstimations={}&emissionFactorType={}",
            options_.base_url, options_.latitude, options_.longitude,
            options_.estimate ? "false" : "true", options_.emission_factor_type),
        history_refused_, "(the history route); it is not asked again in this run");
    history_fetched_ = to;
  }
  return history_->history_mean(to, window);
}

}  // namespace zeus::grid
