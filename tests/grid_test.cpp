// The grid's signal (trace files, the poller) and the rule that follows it (optimize/grid_rule),
// and the recurring jobs replayed under a trace (sim/grid_replay).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/grid/poller.h"
#include "zeus/grid/signal_trace.h"
#include "zeus/optimize/grid_rule.h"
#include "zeus/sim/grid_replay.h"
#include "zeus/trace/power_trace.h"
#include "zeus/trace/train_trace.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using grid::Clock;
using grid::SignalKind;

Clock::time_point utc(int y, unsigned mo, unsigned d, int h, int mi = 0, int s = 0) {
  using namespace std::chrono;
  return Clock::time_point{sys_days{year{y} / month{mo} / day{d}}.time_since_epoch() + hours{h} +
                           minutes{mi} + seconds{s}};
}

TEST(GridTime, ParsesTheFormsElectricityMapsWrites) {
  EXPECT_EQ(grid::parse_iso8601("2024-09-24T03:00:00.000Z"), utc(2024, 9, 24, 3));
  EXPECT_EQ(grid::parse_iso8601("2022-10-20T06:20:00+00:00"), utc(2022, 10, 20, 6, 20));
  EXPECT_EQ(grid::parse_iso8601("2024-09-24 03:00:00"), utc(2024, 9, 24, 3));
  EXPECT_EQ(grid::parse_iso8601("2024-09-24T03:00"), utc(2024, 9, 24, 3));
  EXPECT_EQ(grid::parse_iso8601("2024-09-24"), utc(2024, 9, 24, 0));
  // 05:30 at +02:00 is 03:30 UTC; at -01:00, 06:30.
  EXPECT_EQ(grid::parse_iso8601("2024-09-24T05:30:00+02:00"), utc(2024, 9, 24, 3, 30));
  EXPECT_EQ(grid::parse_iso8601("2024-09-24T05:30:00-0100"), utc(2024, 9, 24, 6, 30));
  for (const char* bad : {"", "2024-13-01T00:00Z", "2024-02-30", "2024-09-24T25:00", "yesterday",
                          "2024-09-24T03:00:00Zjunk", "2024-09-24T03:00:00."}) {
    EXPECT_EQ(grid::parse_iso8601(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(grid::format_iso8601(utc(2024, 9, 24, 3, 4, 5)), "2024-09-24T03:04:05Z");
}

TEST(SignalTrace, CsvRowsInAnyOrderAndTheRowOfNow) {
  const auto t = grid::SignalTrace::parse(
      "datetime,carbonIntensity\n2024-04-15T01:00:00Z,200\n2024-04-15T00:00:00Z,100\n"
      "2024-04-15T02:00:00Z,300\n",
      "ci.csv", SignalKind::kCarbonIntensity);
  ASSERT_EQ(t.points().size(), 3u);
  EXPECT_EQ(t.at(utc(2024, 4, 15, 0, 59)).value, 100);
  EXPECT_EQ(t.at(utc(2024, 4, 15, 1)).value, 200);
  EXPECT_EQ(t.at(utc(2024, 4, 14, 23)).value, 100);  // before it: the first row
  EXPECT_EQ(t.at(utc(2024, 4, 16, 0)).value, 300);   // after it: the last
  // The mean over the next 30 min or hour, weighted by time: 00:30-01:00 at 100, 01:00-01:30
  // at 200.
  EXPECT_DOUBLE_EQ(*t.mean_over(utc(2024, 4, 15, 0, 30), 1h), 150);
  EXPECT_DOUBLE_EQ(*t.mean_over(utc(2024, 4, 15, 0, 45), 30min), 100 * 0.5 + 200 * 0.5);
  EXPECT_DOUBLE_EQ(*t.mean_over(utc(2024, 4, 15, 0, 10), 20min), 100);
  EXPECT_DOUBLE_EQ(*t.mean_over(utc(2024, 4, 15, 0), 3h), 200);        // the whole trace
  EXPECT_EQ(t.mean_over(utc(2024, 4, 15, 2, 30), 1h), std::nullopt);   // past its end at 03:00
  EXPECT_EQ(t.mean_over(utc(2024, 4, 14, 23, 30), 1h), std::nullopt);  // before it begins
  EXPECT_EQ(t.mean_over(utc(2024, 4, 15, 1), 0h), std::nullopt);
  // Rows of one value average to it exactly, wherever the horizon starts (the rule compares it
  // with the reference: 750 must stay 750, not 749.99...).
  const auto flat = grid::SignalTrace::parse(
      "datetime,carbonIntensity\n2024-04-15T00:00:00Z,100\n2024-04-15T01:00:00Z,100\n"
      "2024-04-15T02:00:00Z,100\n",
      "flat.csv", SignalKind::kCarbonIntensity);
  for (int64_t s = 0; s < 3600; s += 7) {
    const auto from = utc(2024, 4, 15, 0) + std::chrono::seconds(s) +
                      std::chrono::nanoseconds(s * 7'919'113 % 1'000'000'000);
    EXPECT_EQ(*flat.mean_over(from, 1h), 100.0) << s;
    EXPECT_EQ(*flat.mean_over(from, 1800s), 100.0) << s;
  }
  EXPECT_EQ(t.step(), 1h);
  EXPECT_EQ(t.span(), 3h);
  EXPECT_DOUBLE_EQ(t.mean(), 200);
  EXPECT_DOUBLE_EQ(t.max(), 300);
}

TEST(SignalTrace, ReadsElectricityMapsJsonAndItsCsvExport) {
  const auto history = grid::SignalTrace::parse(
      R"({"zone":"US-MIDW-MISO","history":[
        {"zone":"US-MIDW-MISO","carbonIntensity":466,"datetime":"2024-09-24T03:00:00.000Z",
         "emissionFactorType":"lifecycle","isEstimated":true},
        {"zone":"US-MIDW-MISO","carbonIntensity":480,"datetime":"2024-09-24T04:00:00.000Z"}]})",
      "history.json", SignalKind::kCarbonIntensity);
  ASSERT_EQ(history.points().size(), 2u);
  EXPECT_EQ(history.at(utc(2024, 9, 24, 4, 10)).value, 480);
  const auto latest = grid::SignalTrace::parse(
      R"({"zone":"US-MIDW-MISO","carbonIntensity":466,"datetime":"2024-09-24T03:00:00.000Z"})",
      "latest.json", SignalKind::kCarbonIntensity);
  EXPECT_EQ(latest.points().front().value, 466);
  const auto exported = grid::SignalTrace::parse(
      "Datetime (UTC),Country,Zone Id,Carbon Intensity gCO2eq/kWh (direct),Renewable "
      "Percentage\n2023-01-01 00:00:00,Poland,PL,712.5,15\n2023-01-01 01:00:00,Poland,PL,700,16\n",
      "PL_2023_hourly.csv", SignalKind::kCarbonIntensity);
  EXPECT_EQ(exported.at(utc(2023, 1, 1, 1)).value, 700);
  const auto price =
      grid::SignalTrace::parse("datetime,price_per_kwh\n2024-04-15T00:00:00Z,0.062\n", "price.csv",
                               SignalKind::kElectricityPrice);
  EXPECT_DOUBLE_EQ(price.points().front().value, 0.062);
}

TEST(SignalTrace, BadFilesNameTheSourceAndWhatIsWrong) {
  auto fails = [](std::string_view text, SignalKind kind, const char* says) {
    try {
      grid::SignalTrace::parse(text, "t.csv", kind);
      ADD_FAILURE() << "parsed: " << text;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("t.csv")) << text;
      EXPECT_THAT(e.what(), HasSubstr(says)) << text;
    }
  };
  fails("datetime,value\n2024-01-01,3\n", SignalKind::kCarbonIntensity, "carbonIntensity");
  fails("datetime,carbonIntensity\n", SignalKind::kCarbonIntensity, "no rows");
  fails("datetime,carbonIntensity\nnoon,3\n", SignalKind::kCarbonIntensity, "ISO 8601");
  fails("datetime,carbonIntensity\n2024-01-01,-3\n", SignalKind::kCarbonIntensity, ">= 0");
  fails("datetime,carbonIntensity\n2024-01-01,3\n2024-01-01T00:00Z,4\n",
        SignalKind::kCarbonIntensity, "two rows");
  fails(R"({"error":"No recent data for zone \"US-MIDW-MISO\""})", SignalKind::kCarbonIntensity,
        "No recent data");
  fails(R"({"datetime":"2024-01-01","carbonIntensity":null})", SignalKind::kCarbonIntensity,
        "carbonIntensity");
  fails("{not json", SignalKind::kCarbonIntensity, "not JSON");
  fails("datetime,carbonIntensity\n2024-01-01,3\n", SignalKind::kElectricityPrice, "price_per_kwh");
  EXPECT_THROW(grid::SignalTrace::load("/nonexistent/ci.csv", SignalKind::kCarbonIntensity),
               IoError);
}

TEST(TraceProvider, ReadsTheFileAgainWhenItChanges) {
  test::TempDir dir;
  const auto path = dir / "ci.csv";
  write_file_atomic(path,
                    "datetime,carbonIntensity\n2024-04-15T00:00:00Z,100\n"
                    "2024-04-15T01:00:00Z,200\n");
  grid::TraceProvider provider(path, SignalKind::kCarbonIntensity);
  auto r = provider.read(utc(2024, 4, 15, 0, 30));
  EXPECT_EQ(r.value, 100);
  EXPECT_EQ(r.valid_from, utc(2024, 4, 15, 0));
  EXPECT_EQ(r.forecast, std::nullopt) << "the poller asks for it, with its horizon";
  EXPECT_DOUBLE_EQ(*provider.forecast(utc(2024, 4, 15, 0, 30), 1h), 150);
  write_file_atomic(path, "datetime,carbonIntensity\n2024-04-15T00:00:00Z,555\n");
  r = provider.read(utc(2024, 4, 15, 0, 30));
  EXPECT_EQ(r.value, 555);
  EXPECT_EQ(provider.forecast(utc(2024, 4, 15, 0, 30), 1h), std::nullopt) << "not that far";
  // A broken rewrite throws, and the trace read before stays.
  write_file_atomic(path, "garbage\n");
  EXPECT_THROW(provider.read(utc(2024, 4, 15, 0, 30)), ConfigError);
  EXPECT_EQ(provider.trace().points().front().value, 555);
}

// Profiles whose choice depends on the knob: a fast hungry limit, a slow frugal one, between.
std::vector<optimize::LimitMeasurement> random_profile(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<optimize::LimitMeasurement> m;
  double tput = 10;
  double power = 300;
  for (int64_t w = 300; w >= 100; w -= 25) {
    m.push_back({w * 1000, tput, power});
    tput *= 0.85 + 0.15 * u(rng);
    power *= 0.75 + 0.2 * u(rng);
  }
  return m;
}

// The issue's formula, written out: cost(p) = eta E S + (1 - eta) MAXPOWER S_max T per
// iteration; argmin, ties to the higher limit.
int64_t formula_choice(const std::vector<optimize::LimitMeasurement>& m, double eta,
                       double max_power_w, double s, double s_max) {
  int64_t best = 0;
  double best_cost = 0;
  for (const auto& x : m) {
    const double cost = eta * (x.power_w / x.throughput_ips) * s +
                        (1 - eta) * max_power_w * s_max / x.throughput_ips;
    if (best == 0 || cost < best_cost * (1 - 1e-12) ||
        (cost <= best_cost * (1 + 1e-12) && x.power_limit_mw > best)) {
      best = x.power_limit_mw;
      best_cost = cost;
    }
  }
  return best;
}

TEST(GridRule, IsTheFormulaAndZeusAtTheReference) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int differ_from_zeus = 0;
  for (int i = 0; i < 500; ++i) {
    const auto m = random_profile(rng);
    const double eta = u(rng);
    const double s_max = 750;
    const double s = 50 + 900 * u(rng);
    const int64_t rule = optimize::select_grid_limit(m, eta, 300 * 4, s, s_max);
    EXPECT_EQ(rule, formula_choice(m, eta, 300 * 4, s, s_max)) << "case " << i;
    const int64_t zeus = optimize::select_power_limit(m, optimize::CostModel(eta, 1200),
                                                      optimize::SelectorOptions{});
    EXPECT_EQ(optimize::select_grid_limit(m, eta, 1200, s_max, s_max), zeus) << "case " << i;
    // A dirtier grid never raises the limit above Zeus's; a cleaner one never lowers it.
    if (s > s_max) {
      EXPECT_LE(rule, zeus) << "case " << i;
    } else {
      EXPECT_GE(rule, zeus) << "case " << i;
    }
    differ_from_zeus += rule != zeus;
  }
  EXPECT_GT(differ_from_zeus, 50);  // the signal matters in these profiles (70 of 500)
}

TEST(GridRule, KnobEdgesAndBadInputs) {
  for (double eta : {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0}) {
    EXPECT_EQ(optimize::grid_eta(eta, 750, 750), eta);
  }
  EXPECT_DOUBLE_EQ(optimize::grid_eta(0.5, 375, 750), 1.0 / 3);
  EXPECT_EQ(optimize::grid_eta(1.0, 0, 750), 0.0);
  EXPECT_EQ(optimize::grid_eta(0.5, 0, 750), 0.0);
  EXPECT_THROW(optimize::grid_eta(1.5, 100, 750), ConfigError);
  EXPECT_THROW(optimize::grid_eta(0.5, -1, 750), ConfigError);
  EXPECT_THROW(optimize::grid_eta(0.5, 100, 0), ConfigError);
}

// 300 W: 10 it/s at 300 W; 200 W: 8 it/s at 160 W. Zeus (eta 0.5, MAXPOWER 300) keeps 200 W.
const std::vector<optimize::LimitMeasurement> kTwoLimits{{300'000, 10, 300}, {200'000, 8, 160}};

optimize::GridFollowerOptions two_limit_options() {
  optimize::GridFollowerOptions o;
  o.eta = 0.5;
  o.max_power_w = 300;
  o.signal_max = 750;
  o.interval = 1800s;
  return o;
}

// Note [grid reference] (issue #52): under the grid's own reference the choice is Zeus's on an
// average hour, lower in a dirtier one and higher in a cleaner one; with no reference known yet it
// is Zeus's.
TEST(GridFollower, UnderTheGridsOwnReferenceAnAverageHourIsZeussChoice) {
  auto o = two_limit_options();
  o.signal_max = optimize::kGridReference;
  optimize::GridFollower f(kTwoLimits, o);
  auto c = f.observe(100, 0s, std::nullopt, std::nullopt);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, f.zeus_limit_mw()) << "no reference yet: Zeus's";
  EXPECT_EQ(c->reference, 100);
  c = f.observe(230, 1800s, std::nullopt, 230.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 200'000) << "the average hour: Zeus's";
  EXPECT_THAT(c->reason, HasSubstr("the grid's reference 230"));
  c = f.observe(23, 1900s, std::nullopt, 230.0);  // a tenth of the day's mean: energy is cheap
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 300'000);
  EXPECT_THAT(c->reason, HasSubstr("against the reference"));
  // The 10% test is on S / S_max: the reference moving with the signal is no move.
  EXPECT_FALSE(f.observe(25, 2000s, std::nullopt, 250.0));
  // Chase's fixed 750 on the same average hour leans away from Zeus: it runs at 300 W.
  o.signal_max = optimize::kChaseMaxCarbon;
  optimize::GridFollower chase(kTwoLimits, o);
  EXPECT_EQ(chase.observe(230, 0s, std::nullopt, 230.0)->limit_mw, 300'000);
}

TEST(GridFollower, ReferencesAreNamedGridChaseOrANumber) {
  EXPECT_EQ(optimize::parse_grid_reference("grid", "X", true), optimize::kGridReference);
  EXPECT_EQ(optimize::parse_grid_reference("chase", "X", true), 750.0);
  EXPECT_EQ(optimize::parse_grid_reference("412.5", "X", true), 412.5);
  EXPECT_EQ(optimize::parse_grid_reference("0.12", "ZEUS_MAX_PRICE", false), 0.12);
  for (const char* bad : {"", "-1", "0", "nan", "inf", "750W"}) {
    EXPECT_THROW(optimize::parse_grid_reference(bad, "ZEUS_MAX_CARBON_INTENSITY", true),
                 ConfigError)
        << bad;
  }
  try {
    optimize::parse_grid_reference("chase", "ZEUS_MAX_PRICE", false);
    FAIL() << "chase is a carbon intensity";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ZEUS_MAX_PRICE='chase'"));
    EXPECT_THAT(e.what(), HasSubstr("$/kWh"));
  }
}

TEST(GridFollower, ChoosesAgainAfterTheIntervalOrABigMove) {
  const auto& m = kTwoLimits;
  const auto o = two_limit_options();
  optimize::GridFollower f(m, o);
  EXPECT_EQ(f.zeus_limit_mw(), 200'000);
  // At 100 g/kWh energy weighs little: 300 W. (cost 300 W: (0.5*300*100/750 + 150)/10 = 17;
  // 200 W: (0.5*160*100/750 + 150)/8 = 20.08.)
  auto c = f.observe(100, 0s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 300'000);
  EXPECT_TRUE(c->changed);
  EXPECT_FALSE(f.observe(109, 60s));  // 9%: not a move
  c = f.observe(700, 120s);           // a big move: back towards Zeus
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 200'000);
  EXPECT_THAT(c->reason, HasSubstr("moved"));
  EXPECT_FALSE(f.observe(710, 1000s));
  c = f.observe(710, 120s + 1800s);  // the interval passed: chosen again, the same limit
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->changed);
  EXPECT_THAT(c->reason, HasSubstr("since the last choice"));
  EXPECT_THROW(optimize::GridFollower({}, o), ConfigError);
}

TEST(GridFollower, ChoosesForTheIntervalAheadWhenTheProviderForecastsIt) {
  optimize::GridFollower f(kTwoLimits, two_limit_options());
  // Dirty now (700) but clean for the interval ahead (100): the rule chooses for the interval.
  auto c = f.observe(700, 0s, 100.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 300'000);
  EXPECT_EQ(c->signal, 100);
  EXPECT_THAT(c->reason, HasSubstr("forecast"));
  // The 10% test compares forecasts: the value now moving alone chooses nothing.
  EXPECT_FALSE(f.observe(100, 60s, 105.0));
  c = f.observe(100, 120s, 700.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->limit_mw, 200'000);
  // Without a forecast it rules on the value now, as before.
  c = f.observe(100, 180s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->signal, 100);
  EXPECT_EQ(c->limit_mw, 300'000);
}

// A provider the test steers: a value, or a failure.
class SteeredProvider final : public grid::SignalProvider {
 public:
  std::atomic<double> value{100};
  std::atomic<bool> fail{false};
  SignalKind kind() const override { return SignalKind::kCarbonIntensity; }
  std::string describe() const override { return "the steered provider"; }
  grid::SignalReading read(Clock::time_point now) override {
    if (fail) {
      throw IoError("http://127.0.0.1:1/latest answered 500: boom");
    }
    return {value, now, std::nullopt};
  }
};

TEST(SignalPoller, KeepsTheLastValueWhileTheProviderFails) {
  auto owned = std::make_unique<SteeredProvider>();
  SteeredProvider* provider = owned.get();
  grid::SignalPoller poller(std::move(owned), {}, /*start=*/false);
  EXPECT_EQ(poller.latest(), std::nullopt);
  provider->fail = true;
  EXPECT_FALSE(poller.poll_once());
  EXPECT_EQ(poller.latest(), std::nullopt);  // nothing known yet: the caller keeps Zeus's
  provider->fail = false;
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 100);
  provider->fail = true;
  provider->value = 400;
  EXPECT_FALSE(poller.poll_once());
  EXPECT_FALSE(poller.poll_once());
  const auto last = poller.latest();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->reading.value, 100);
  ASSERT_TRUE(last->error);
  EXPECT_THAT(*last->error, HasSubstr("answered 500"));
  EXPECT_EQ(poller.failures(), 3);
  provider->fail = false;
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 400);
  EXPECT_EQ(poller.latest()->error, std::nullopt);
}

TEST(SignalPoller, AsksTheProviderForTheHorizonsForecast) {
  test::TempDir dir;
  const auto path = dir / "ci.csv";
  write_file_atomic(path,
                    "datetime,carbonIntensity\n2024-04-15T00:00:00Z,100\n"
                    "2024-04-15T01:00:00Z,300\n");
  grid::PollerOptions o;
  o.now = [] { return utc(2024, 4, 15, 0, 30); };
  o.forecast_horizon = 1h;
  grid::SignalPoller poller(
      std::make_unique<grid::TraceProvider>(path, SignalKind::kCarbonIntensity), o,
      /*start=*/false);
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 100);
  EXPECT_EQ(poller.latest()->reading.forecast, 200.0);
  // Beyond the trace's end: no forecast, the value still read.
  o.now = [] { return utc(2024, 4, 15, 1, 30); };
  grid::SignalPoller late(std::make_unique<grid::TraceProvider>(path, SignalKind::kCarbonIntensity),
                          o, /*start=*/false);
  ASSERT_TRUE(late.poll_once());
  EXPECT_EQ(late.latest()->reading.value, 300);
  EXPECT_EQ(late.latest()->reading.forecast, std::nullopt);
}

// The grid's own reference: the provider's history of the last day, else its forecast of the
// next, else the mean of the readings so far.
TEST(SignalPoller, GivesTheGridsReferenceFromHistoryThenForecastThenItsReadings) {
  test::TempDir dir;
  const auto path = dir / "ci.csv";
  write_file_atomic(path,
                    "datetime,carbonIntensity\n2024-04-15T00:00:00Z,100\n"
                    "2024-04-15T12:00:00Z,300\n2024-04-16T00:00:00Z,500\n");
  grid::Clock::time_point now = utc(2024, 4, 16, 0, 0);
  grid::PollerOptions o;
  o.now = [&] { return now; };
  o.reference_window = grid::kReferenceWindow;
  grid::SignalPoller poller(
      std::make_unique<grid::TraceProvider>(path, SignalKind::kCarbonIntensity), o,
      /*start=*/false);
  ASSERT_TRUE(poller.poll_once());
  EXPECT_EQ(poller.latest()->reading.value, 500);
  EXPECT_DOUBLE_EQ(*poller.latest()->reading.reference, 200.0) << "the day before: 12 h each";
  now = utc(2024, 4, 15, 18, 0);  // 18 h of history: 12 at 100, 6 at 300
  grid::SignalPoller later(
      std::make_unique<grid::TraceProvider>(path, SignalKind::kCarbonIntensity), o,
      /*start=*/false);
  ASSERT_TRUE(later.poll_once());
  EXPECT_DOUBLE_EQ(*later.latest()->reading.reference, (100.0 * 12 + 300.0 * 6) / 18);
  now = utc(2024, 4, 15, 0, 0);  // the trace's first row: no history, its next day ahead
  grid::SignalPoller first(
      std::make_unique<grid::TraceProvider>(path, SignalKind::kCarbonIntensity), o,
      /*start=*/false);
  ASSERT_TRUE(first.poll_once());
  EXPECT_DOUBLE_EQ(*first.latest()->reading.reference, 200.0);
  // A provider of the present only: the readings, each held until the next.
  auto owned = std::make_unique<SteeredProvider>();
  SteeredProvider* steered = owned.get();
  grid::SignalPoller mine(std::move(owned), o, /*start=*/false);
  now = utc(2024, 4, 15, 0, 0);
  ASSERT_TRUE(mine.poll_once());
  EXPECT_EQ(mine.latest()->reading.reference, 100.0) << "one reading: itself";
  steered->value = 400;
  now = utc(2024, 4, 15, 3, 0);
  ASSERT_TRUE(mine.poll_once());
  EXPECT_EQ(mine.latest()->reading.reference, 100.0);
  now = utc(2024, 4, 15, 4, 0);
  ASSERT_TRUE(mine.poll_once());
  EXPECT_DOUBLE_EQ(*mine.latest()->reading.reference, (100.0 * 3 + 400.0) / 4);
}

TEST(SignalPoller, AHungProviderNeverBlocksTheReader) {
  // The provider's read takes 2 s; latest() answers at once meanwhile.
  class Slow final : public grid::SignalProvider {
   public:
    SignalKind kind() const override { return SignalKind::kCarbonIntensity; }
    std::string describe() const override { return "slow"; }
    grid::SignalReading read(Clock::time_point now) override {
      std::this_thread::sleep_for(2s);
      return {5, now, std::nullopt};
    }
  };
  grid::PollerOptions o;
  o.period = 10ms;
  grid::SignalPoller poller(std::make_unique<Slow>(), o);
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ(poller.latest(), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 500ms);
}

const trace::TrainTrace& train() {
  static const trace::TrainTrace t = trace::TrainTrace::load_default();
  return t;
}

sim::WorkloadModel v100_cifar() {
  static const trace::PowerTrace power = trace::PowerTrace::load_gpu("v100");
  return sim::WorkloadModel("v100", trace::find_workload("cifar100"), power, train());
}

// One row per `step_min` minutes from 2024-04-15 00:00 UTC.
std::string stepped_trace(const std::vector<double>& values, int step_min = 60) {
  std::string text = "datetime,carbonIntensity\n";
  for (size_t i = 0; i < values.size(); ++i) {
    const int m = static_cast<int>(i) * step_min;
    text += fmt::format("2024-04-15T{:02}:{:02}:00Z,{}\n", m / 60, m % 60, values[i]);
  }
  return text;
}

TEST(GridReplay, AtTheReferenceTheRuleIsZeusAndCarbonIsEnergyTimesIntensity) {
  const auto model = v100_cifar();
  const auto flat = grid::SignalTrace::parse(stepped_trace({750, 750, 750, 750}), "flat",
                                             SignalKind::kCarbonIntensity);
  sim::GridReplayOptions o;
  o.recurrences = 3;
  const auto r = sim::replay_grid(model, flat, o);
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_EQ(r.rule_limits_w, std::vector<int64_t>{r.zeus_limit_w});
  const int64_t b = model.default_batch_size();
  const double energy = static_cast<double>(r.epochs) * model.epoch_energy_j(b, r.zeus_limit_w);
  const double time = static_cast<double>(r.epochs) * model.epoch_time_s(b, r.zeus_limit_w);
  for (const auto& j : r.jobs) {
    EXPECT_NEAR(j.zeus.energy_j, energy, 1e-6 * energy);
    EXPECT_NEAR(j.zeus.time_s, time, 1e-6 * time);
    EXPECT_NEAR(j.zeus.amount, energy / 3.6e6 * 750, 1e-6 * energy);
    EXPECT_NEAR(j.rule.amount, j.zeus.amount, 1e-9 * energy);
  }
  EXPECT_NEAR(r.jobs[1].zeus.start_s, time, 1e-6 * time);
}

// A flat grid under the default reference (the grid's own) is Zeus's choice exactly, whatever
// its level; under Chase's 750 a flat 230 gCO2eq/kWh grid runs faster than Zeus and emits more.
TEST(GridReplay, OnAFlatGridTheDefaultRuleIsZeusExactly) {
  const auto model = v100_cifar();
  const auto flat = grid::SignalTrace::parse(stepped_trace({230, 230, 230, 230}), "flat",
                                             SignalKind::kCarbonIntensity);
  sim::GridReplayOptions o;
  o.recurrences = 2;
  const auto r = sim::replay_grid(model, flat, o);
  EXPECT_EQ(r.rule_limits_w, std::vector<int64_t>{r.zeus_limit_w});
  for (const auto& j : r.jobs) {
    EXPECT_EQ(j.rule.amount, j.zeus.amount);
    EXPECT_EQ(j.rule.time_s, j.zeus.time_s);
    EXPECT_EQ(j.rule.limit_changes, 0);
    EXPECT_NEAR(j.bound.cost, j.zeus.cost, 1e-3 * j.zeus.cost)
        << "little to gain on a flat grid (a mix of limits may beat Zeus's by a hair)";
    EXPECT_LE(j.bound.cost, j.zeus.cost * (1 + 1e-12));
  }
  o.signal_max = optimize::kChaseMaxCarbon;
  const auto chase = sim::replay_grid(model, flat, o);
  EXPECT_GT(chase.rule_limits_w.front(), chase.zeus_limit_w);
  EXPECT_LT(chase.amount_saving(), 0.0) << "Chase's reference emits more on a clean flat grid";
}

// Issue #52: with the default reference the rule never emits more than Zeus's fixed choice on
// the project's day traces (bench/grid), over the paper's 24 jobs; Chase's 750 did (9-10% more
// on the solar and windy days).
TEST(GridReplay, TheDefaultReferenceNeverEmitsMoreThanZeusOnTheProjectsTraces) {
  const std::filesystem::path bench = std::filesystem::path(ZEUS_SOURCE_DIR) / "bench" / "grid";
  for (const auto& [file, kind] : std::vector<std::pair<std::string, SignalKind>>{
           {"caiso_spring_day.csv", SignalKind::kCarbonIntensity},
           {"denmark_windy_day.csv", SignalKind::kCarbonIntensity},
           {"poland_day.csv", SignalKind::kCarbonIntensity},
           {"caiso_price_day.csv", SignalKind::kElectricityPrice}}) {
    const auto trace = grid::SignalTrace::load(bench / file, kind);
    double zeus = 0;
    double rule = 0;
    double chase_rule = 0;
    double zeus_cost = 0;
    double rule_cost = 0;
    double bound_cost = 0;
    for (const std::string_view gpu : trace::trace_gpu_models()) {
      const trace::PowerTrace power = trace::PowerTrace::load_gpu(std::string(gpu));
      for (const auto& job : trace::all_workloads()) {
        const sim::WorkloadModel model(std::string(gpu), job, power, train());
        const auto r = sim::replay_grid(model, trace, {});
        zeus += r.zeus_total().amount;
        rule += r.rule_total().amount;
        zeus_cost += r.zeus_total().cost;
        rule_cost += r.rule_total().cost;
        bound_cost += r.bound_total().cost;
        for (const auto& j : r.jobs) {
          EXPECT_LE(j.bound.cost, j.rule.cost * (1 + 1e-12)) << file << " " << gpu;
        }
        sim::GridReplayOptions chase;
        chase.signal_max =
            kind == SignalKind::kCarbonIntensity ? optimize::kChaseMaxCarbon : trace.max() * 5;
        chase_rule += sim::replay_grid(model, trace, chase).rule_total().amount;
      }
    }
    EXPECT_LE(rule, zeus) << file << ": the default rule emitted (or spent) more than Zeus";
    EXPECT_LE(bound_cost, rule_cost * (1 + 1e-12)) << file << ": the offline bound is no bound";
    EXPECT_LE(bound_cost, zeus_cost * (1 + 1e-12)) << file;
    EXPECT_GT(bound_cost, 0.9 * zeus_cost) << file << ": a bound, not a collapse";
    if (file != "poland_day.csv") {
      EXPECT_GT(chase_rule, zeus) << file << ": a reference above every hour leans to time";
    }
  }
}

TEST(GridReplay, EachHourIsChargedItsOwnIntensity) {
  const auto model = v100_cifar();
  // Two 5-minute rows, 100 then 700; the job is longer than 10 minutes, so it repeats them.
  const auto t =
      grid::SignalTrace::parse(stepped_trace({100, 700}, 5), "two", SignalKind::kCarbonIntensity);
  sim::GridReplayOptions o;
  o.recurrences = 1;
  o.signal_max = 400;
  o.forecast = false;  // the rule on the value now
  const auto r = sim::replay_grid(model, t, o);
  const int64_t b = model.default_batch_size();
  const double power_w =
      model.epoch_energy_j(b, r.zeus_limit_w) / model.epoch_time_s(b, r.zeus_limit_w);
  const double time = r.jobs[0].zeus.time_s;
  ASSERT_GT(time, 600.0);
  // Zeus's fixed limit: the rows alternate 100, 700, 100, ...
  double grams = 0;
  for (double from = 0; from < time; from += 300) {
    const double row = std::min(300.0, time - from);
    const double ci = static_cast<int64_t>(from / 300) % 2 == 0 ? 100 : 700;
    grams += power_w * row / 3.6e6 * ci;
  }
  EXPECT_NEAR(r.jobs[0].zeus.amount, grams, 1e-6 * grams);
  // The rule runs at a higher limit in the clean rows (and at Zeus's, its lowest worth it, in
  // the dirty ones here), changing limit at the rows: it is faster and spends more energy.
  EXPECT_GT(r.rule_limits_w.size(), 1u);
  EXPECT_GE(r.rule_limits_w.front(), r.zeus_limit_w);
  EXPECT_GT(r.rule_limits_w.back(), r.zeus_limit_w);
  EXPECT_GT(r.jobs[0].rule.limit_changes, 1);
  EXPECT_LT(r.jobs[0].rule.time_s, time);
  EXPECT_LT(r.energy_saving(), 0.0);
  o.batch_size = 3;
  EXPECT_THROW(sim::replay_grid(model, t, o), ConfigError);

  // With the forecast, every 30 minutes ahead average 400, the reference: the rule keeps Zeus's
  // choice through the swing and spends what Zeus spends.
  o.batch_size = 0;
  o.forecast = true;
  const auto f = sim::replay_grid(model, t, o);
  EXPECT_EQ(f.rule_limits_w, std::vector<int64_t>{f.zeus_limit_w});
  EXPECT_EQ(f.jobs[0].rule.limit_changes, 0);
  EXPECT_NEAR(f.jobs[0].rule.amount, f.jobs[0].zeus.amount, 1e-9 * grams);
}

}  // namespace
}  // namespace zeus
