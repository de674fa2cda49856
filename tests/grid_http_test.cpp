// ElectricityMapsProvider against a local server that answers what ElectricityMaps' v3 API
// answers (its replies as Zeus 0.16's tests record them), and the poller over it when the server
// fails, hangs or sends garbage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/grid/electricity_maps.h"
#include "zeus/grid/poller.h"
#include "zeus/http/server.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr const char* kLatest =
    R"({"zone":"US-MIDW-MISO","carbonIntensity":466,"datetime":"2024-09-24T03:00:00.000Z",)"
    R"("updatedAt":"2024-09-24T02:51:57.260Z","createdAt":"2024-09-21T03:52:02.373Z",)"
    R"("emissionFactorType":"lifecycle","isEstimated":true,"estimationMethod":"TIME_SLICER_AVERAGE"})";

// What the fake API answers next, and what it was asked.
struct FakeApi {
  std::mutex mu;
  int status = 200;
  std::string body = kLatest;
  std::chrono::milliseconds delay{0};
  std::map<std::string, std::pair<int, std::string>>
      routes;  // path -> status, body; else the above
  std::vector<http::Request> seen;

  http::Response answer(const http::Request& request) {
    std::chrono::milliseconds delay_now;
    http::Response response;
    {
      std::lock_guard lock(mu);
      seen.push_back(request);
      delay_now = delay;
      const auto route = routes.find(request.path);
      response = route != routes.end()
                     ? http::Response::json(route->second.first, route->second.second)
                     : http::Response::json(status, body);
    }
    std::this_thread::sleep_for(delay_now);
    return response;
  }
};

struct Served {
  FakeApi api;
  std::unique_ptr<http::Server> server;
  Served() {
    http::ServerOptions o;
    o.mode = http::ServerOptions::Mode::kTcp;
    o.tcp_address = "127.0.0.1:0";
    server =
        std::make_unique<http::Server>(o, [this](const http::Request& r) { return api.answer(r); });
  }
  grid::ElectricityMapsOptions options() const {
    grid::ElectricityMapsOptions o;
    o.base_url = fmt::format("http://127.0.0.1:{}/v3/", server->tcp_port());
    o.latitude = 42.28;
    o.longitude = -83.74;
    o.timeout = 1000ms;
    return o;
  }
};

std::string query_value(const http::Request& r, const std::string& key) {
  for (const auto& [k, v] : r.query) {
    if (k == key) {
      return v;
    }
  }
  return "<absent>";
}

TEST(ElectricityMaps, AsksWhatUpstreamAsksAndReadsTheLatestValue) {
  Served s;
  auto options = s.options();
  options.token = "s3cret";
  grid::ElectricityMapsProvider provider(options);
  const auto r = provider.read(grid::Clock::now());
  EXPECT_EQ(r.value, 466);
  EXPECT_EQ(r.valid_from, grid::parse_iso8601("2024-09-24T03:00:00Z"));
  ASSERT_EQ(s.api.seen.size(), 1u);
  const auto& req = s.api.seen[0];
  EXPECT_EQ(req.path, "/v3/carbon-intensity/latest");
  EXPECT_EQ(query_value(req, "lat"), "42.28");
  EXPECT_EQ(query_value(req, "lon"), "-83.74");
  EXPECT_EQ(query_value(req, "disableEstimations"), "true");  // estimate=False, upstream's default
  EXPECT_EQ(query_value(req, "emissionFactorType"), "direct");
  EXPECT_EQ(req.header("auth-token"), "s3cret");
  options.token.clear();
  options.estimate = true;
  options.emission_factor_type = "lifecycle";
  grid::ElectricityMapsProvider(options).read(grid::Clock::now());
  EXPECT_EQ(s.api.seen[1].header("auth-token"), std::nullopt);
  EXPECT_EQ(query_value(s.api.seen[1], "disableEstimations"), "false");
  EXPECT_EQ(query_value(s.api.seen[1], "emissionFactorType"), "lifecycle");
  options.emission_factor_type = "average";
  EXPECT_THROW(grid::ElectricityMapsProvider{options}, ConfigError);
}

TEST(ElectricityMaps, TheApisErrorsNameTheUrlAndWhatItSaid) {
  Served s;
  grid::ElectricityMapsProvider provider(s.options());
  s.api.status = 404;
  s.api.body = R"({"error":"No recent data for zone \"US-MIDW-MISO\""})";
  try {
    provider.read(grid::Clock::now());
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("answered 404"));
    EXPECT_THAT(e.what(), HasSubstr("No recent data for zone"));
    EXPECT_THAT(e.what(), HasSubstr("/v3/carbon-intensity/latest"));
  }
  s.api.status = 200;
  s.api.body = "<html>gateway</html>";
  EXPECT_THROW(provider.read(grid::Clock::now()), ConfigError);
}

TEST(ElectricityMaps, ThePollerRidesOutA500GarbageAndAHang) {
  Served s;
  grid::SignalPoller poller(std::make_unique<grid::ElectricityMapsProvider>(s.options()), {},
                            /*start=*/false);
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 466);
  s.api.status = 500;
  s.api.body = "{}";
  EXPECT_FALSE(poller.poll_once());
  s.api.status = 200;
  s.api.body = "garbage";
  EXPECT_FALSE(poller.poll_once());
  s.api.body = kLatest;
  s.api.delay = 3000ms;  // past the 1 s timeout
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_FALSE(poller.poll_once());
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2500ms);
  const auto last = poller.latest();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->reading.value, 466);
  EXPECT_TRUE(last->error);
  EXPECT_EQ(poller.failures(), 3);
  s.api.delay = 0ms;
}

// ElectricityMaps' forecast reply: hourly rows from the next hour.
constexpr const char* kForecast =
    R"({"zone":"US-MIDW-MISO","forecast":[{"carbonIntensity":200,"datetime":"2024-09-24T04:00:00.000Z"},)"
    R"({"carbonIntensity":600,"datetime":"2024-09-24T05:00:00.000Z"},)"
    R"({"carbonIntensity":300,"datetime":"2024-09-24T06:00:00.000Z"}],)"
    R"("updatedAt":"2024-09-24T02:51:57.260Z"})";

grid::Clock::time_point at(const char* iso) {
  return *grid::parse_iso8601(iso);
}

TEST(ElectricityMaps, TheForecastIsTheMeanOfItsHoursLedByTheValueNow) {
  Served s;
  s.api.routes["/v3/carbon-intensity/forecast"] = {200, kForecast};
  auto options = s.options();
  options.token = "s3cret";
  options.emission_factor_type = "lifecycle";
  grid::ElectricityMapsProvider provider(options);
  provider.read(at("2024-09-24T03:20:00Z"));  // 466 from 03:00
  // 03:30-04:00 at the value now, 04:00-04:30 at the forecast's first hour.
  EXPECT_DOUBLE_EQ(*provider.forecast(at("2024-09-24T03:30:00Z"), 1h), (466 + 200) / 2.0);
  ASSERT_EQ(s.api.seen.size(), 2u);
  const auto& req = s.api.seen[1];
  EXPECT_EQ(req.path, "/v3/carbon-intensity/forecast");
  EXPECT_EQ(query_value(req, "lat"), "42.28");
  EXPECT_EQ(query_value(req, "lon"), "-83.74");
  EXPECT_EQ(query_value(req, "horizonHours"), "6");
  EXPECT_EQ(query_value(req, "emissionFactorType"), "lifecycle");
  EXPECT_EQ(req.header("auth-token"), "s3cret");
  // Within 15 minutes the forecast is reused; past it, fetched again.
  EXPECT_DOUBLE_EQ(*provider.forecast(at("2024-09-24T04:30:00Z") - 50min, 2h),
                   (466 * 20 + 200 * 60 + 600 * 40) / 120.0);
  EXPECT_EQ(s.api.seen.size(), 2u);
  EXPECT_DOUBLE_EQ(*provider.forecast(at("2024-09-24T04:00:00Z"), 2h), 400);
  EXPECT_EQ(s.api.seen.size(), 3u);
  // Past the last row's hour there is no forecast.
  EXPECT_EQ(provider.forecast(at("2024-09-24T06:30:00Z"), 1h), std::nullopt);
  EXPECT_EQ(query_value(s.api.seen.back(), "horizonHours"), "6");
  EXPECT_THAT(grid::ElectricityMapsProvider(options).forecast_url(30h),
              HasSubstr("horizonHours=48"));
  EXPECT_THAT(grid::ElectricityMapsProvider(options).forecast_url(100h),
              HasSubstr("horizonHours=72"));
}

TEST(ElectricityMaps, AForecastRefusedToTheTokenIsNotAskedAgain) {
  Served s;
  s.api.routes["/v3/carbon-intensity/forecast"] = {401, R"({"error":"Not authorized"})"};
  grid::ElectricityMapsProvider provider(s.options());
  provider.read(at("2024-09-24T03:20:00Z"));
  try {
    provider.forecast(at("2024-09-24T03:30:00Z"), 30min);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("answered 401: Not authorized"));
    EXPECT_THAT(e.what(), HasSubstr("not asked again"));
  }
  EXPECT_EQ(provider.forecast(at("2024-09-24T04:30:00Z"), 30min), std::nullopt);
  EXPECT_EQ(s.api.seen.size(), 2u);
  // A 500 is asked again at the next poll; the poller keeps the value now meanwhile.
  s.api.routes["/v3/carbon-intensity/forecast"] = {500, "{}"};
  grid::PollerOptions po;
  po.forecast_horizon = 1h;
  po.now = [] { return at("2024-09-24T03:30:00Z"); };
  grid::SignalPoller poller(std::make_unique<grid::ElectricityMapsProvider>(s.options()), po,
                            /*start=*/false);
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 466);
  EXPECT_EQ(poller.latest()->reading.forecast, std::nullopt);
  s.api.routes["/v3/carbon-intensity/forecast"] = {200, kForecast};
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(s.api.seen.size(), 6u);
  EXPECT_EQ(poller.latest()->reading.forecast, (466 + 200) / 2.0);
}

TEST(ElectricityMaps, Location) {
  EXPECT_EQ(grid::parse_location("42.28,-83.74", "ZEUS_CARBON_LOCATION"),
            std::make_pair(42.28, -83.74));
  for (const char* bad : {"", "42", "91,0", "0,181", "a,b", "1,2,3"}) {
    try {
      grid::parse_location(bad, "ZEUS_CARBON_LOCATION");
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("ZEUS_CARBON_LOCATION"));
    }
  }
}

}  // namespace
}  // namespace zeus
