#include "zeus/grid/electricity_maps.h"

#include <fmt/format.h>

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

SignalReading ElectricityMapsProvider::read(Clock::time_point /*now*/) {
  http_client::Request request;
  request.url = latest_url();
  if (!options_.token.empty()) {
    request.headers.push_back("auth-token: " + options_.token);
  }
  const http_client::Reply reply = client_->perform(request);
  if (reply.status != 200) {
    std::string said = reply.body.substr(0, 300);
    try {
      const auto doc = nlohmann::json::parse(reply.body);
      if (doc.is_object() && doc.contains("error")) {
        said = doc["error"].is_string() ? doc["error"].get<std::string>() : doc["error"].dump();
      }
    } catch (const nlohmann::json::exception&) {
    }
    throw IoError(fmt::format("{} answered {}: {}", request.url, reply.status, said));
  }
  const SignalTrace one = SignalTrace::parse(reply.body, request.url, SignalKind::kCarbonIntensity);
  const SignalPoint& p = one.points().back();
  return {p.value, p.at, std::nullopt};
}

}  // namespace zeus::grid
