#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <variant>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/contract/bso_history.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/optimize/cost.h"
#include "zeus/optimize/early_stop.h"
#include "zeus/optimize/power_limit_profiler.h"
#include "zeus/optimize/power_profile.h"

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace zeus::optimize {
namespace {

using contract::append_history;
using contract::read_history;

TEST(CostModel, JoulesAndWattSeconds) {
  const CostModel cost(0.5, 250);
  EXPECT_DOUBLE_EQ(cost.cost(1000, 10), 500 + 0.5 * 250 * 10);
  EXPECT_DOUBLE_EQ(cost.cost_per_iteration(200, 4), (100 + 125) / 4.0);
  EXPECT_THROW(CostModel(1.5, 250), ConfigError);
  EXPECT_THROW(CostModel(-0.1, 250), ConfigError);
  EXPECT_THROW(CostModel(0.5, 0), ConfigError);
}

// Limit A: 250 W at 10 it/s; B: 150 W at 8 it/s. With eta = 0.9 the slower, cheaper B wins
// ((135 + 25) / 8 = 20 < (225 + 25) / 10 = 25). Had MAXPOWER been taken in mW, the time term
// would dwarf power and A would always win: the bug this pins.
TEST(CostModel, SlowerButCheaperLimitWinsWhenEtaIsHigh) {
  const std::vector<LimitMeasurement> m = {{250'000, 10, 250}, {150'000, 8, 150}};
  EXPECT_EQ(select_power_limit(m, CostModel(0.9, 250), {}), 150'000);
  EXPECT_EQ(select_power_limit(m, CostModel(0.0, 250), {}), 250'000);
}

// 300 W: 10 it/s at 280 W; 250 W: 9.5 it/s at 220 W; 200 W: 8 it/s at 170 W. eta 0.5, MAXPOWER
// 300: cost per iteration 29.0, 27.37, 29.375 -> 250. Energy per iteration 28, 23.16, 21.25 ->
// 200. Time -> 300. Slowdown 1.1: 250 (0.1053 s/it <= 0.11) but not 200 (0.125).
const std::vector<LimitMeasurement> kThreeLimits = {
    {300'000, 10, 280}, {250'000, 9.5, 220}, {200'000, 8, 170}};

TEST(SelectPowerLimit, HandMadeThreeLimitTable) {
  const CostModel cost(0.5, 300);
  EXPECT_EQ(select_power_limit(kThreeLimits, cost, parse_selector("cost")), 250'000);
  EXPECT_EQ(select_power_limit(kThreeLimits, cost, parse_selector("energy")), 200'000);
  EXPECT_EQ(select_power_limit(kThreeLimits, cost, parse_selector("time")), 300'000);
  EXPECT_EQ(select_power_limit(kThreeLimits, cost, parse_selector("slowdown:1.1")), 250'000);
  EXPECT_EQ(select_power_limit(kThreeLimits, cost, parse_selector("slowdown:1.3")), 200'000);
  EXPECT_THROW(parse_selector("slowdown:0.9"), ConfigError);
  EXPECT_THROW(parse_selector("fastest"), ConfigError);
}

TEST(SelectPowerLimit, TiesGoToTheHigherLimit) {
  const std::vector<LimitMeasurement> m = {{200'000, 10, 100}, {250'000, 10, 100}};
  EXPECT_EQ(select_power_limit(m, CostModel(0.5, 300), {}), 250'000);
}

TEST(CandidateLimits, MaxDownToMinInSteps) {
  EXPECT_THAT(candidate_limits_mw({100'000, 250'000}, 25'000),
              ElementsAre(250'000, 225'000, 200'000, 175'000, 150'000, 125'000, 100'000));
  EXPECT_THAT(candidate_limits_mw({100'000, 260'000}, 50'000),
              ElementsAre(260'000, 210'000, 160'000, 110'000, 100'000));
  EXPECT_THROW(candidate_limits_mw({100'000, 260'000}, 0), ConfigError);
}

// A shell whose steps take a known time and power per limit (kThreeLimits), on a fake clock: it
// carries out what the profiler returns, as energy_job.cpp does on the node's GPUs.
class FakeShell {
 public:
  void apply(PowerLimitProfiler& p, const MaybeAction& action) {
    if (!action) {
      return;
    }
    ++actions;
    if (const auto* set = std::get_if<profiler_action::SetLimit>(&*action)) {
      limit_mw_ = set->limit_mw;
      limits_set.push_back(set->limit_mw);
    } else if (std::holds_alternative<profiler_action::BeginWindow>(*action)) {
      ASSERT_FALSE(open_);
      open_ = true;
      window_epoch_ = epoch;
      start_s_ = now_s_;
      start_j_ = energy_j_;
    } else if (std::holds_alternative<profiler_action::EndWindow>(*action)) {
      EXPECT_TRUE(open_);
      open_ = false;
      if (window_epoch_ != epoch) {
        straddled = true;
      }
      ++windows;
      apply(p, p.on_window_measured(
                   {std::chrono::duration<double>(now_s_ - start_s_), energy_j_ - start_j_}));
    } else {
      EXPECT_TRUE(open_);
      open_ = false;
      ++cancelled;
    }
  }
  // One training step at the current limit.
  void step() {
    for (const auto& m : kThreeLimits) {
      if (m.power_limit_mw == limit_mw_) {
        now_s_ += 1.0 / m.throughput_ips;
        energy_j_ += m.power_w / m.throughput_ips;
        return;
      }
    }
    ADD_FAILURE() << "step at unexpected limit " << limit_mw_;
  }
  int64_t limit_mw() const { return limit_mw_; }

  std::vector<int64_t> limits_set;
  int epoch = 0;
  int windows = 0;
  int cancelled = 0;
  int actions = 0;
  bool straddled = false;

 private:
  int64_t limit_mw_ = 300'000;
  bool open_ = false;
  int window_epoch_ = 0;
  double now_s_ = 0;
  double energy_j_ = 0;
  double start_s_ = 0;
  double start_j_ = 0;
};

void run_epoch(PowerLimitProfiler& p, FakeShell& host, int64_t iterations) {
  ++host.epoch;
  host.apply(p, p.on_epoch_begin(iterations));
  for (int64_t i = 0; i < iterations; ++i) {
    host.apply(p, p.on_step_begin());
    host.step();
    host.apply(p, p.on_step_end());
  }
  host.apply(p, p.on_epoch_end());
}

// The core decides and returns: at which steps it asks for what, without any shell.
TEST(PowerLimitProfiler, ReturnsWhatToDoAtEachStep) {
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300),
                       {.warmup_iters = 2, .profile_iters = 3, .step_mw = 100'000});
  EXPECT_FALSE(p.on_epoch_begin(10).has_value());
  std::vector<std::string> asked;
  int windows = 0;
  const auto name = [](const MaybeAction& a) -> std::string {
    if (!a) {
      return "-";
    }
    if (const auto* set = std::get_if<profiler_action::SetLimit>(&*a)) {
      return fmt::format("set {}", set->limit_mw / 1000);
    }
    return std::holds_alternative<profiler_action::BeginWindow>(*a) ? "begin"
           : std::holds_alternative<profiler_action::EndWindow>(*a) ? "end"
                                                                    : "cancel";
  };
  for (int i = 0; i < 10; ++i) {
    asked.push_back(name(p.on_step_begin()));
    const MaybeAction end = p.on_step_end();
    asked.push_back(name(end));
    if (end && std::holds_alternative<profiler_action::EndWindow>(*end)) {
      EXPECT_TRUE(p.measurement_owed());
      EXPECT_THROW((void)p.on_step_begin(), InternalError) << "no step while a window is owed";
      // 300 W draws 100 W, 200 W 50 W, at the same speed: 200 W is the cheaper.
      const double energy_j = windows++ == 0 ? 100.0 : 50.0;
      asked.push_back(name(p.on_window_measured({std::chrono::duration<double>(1.0), energy_j})));
    }
  }
  // 300 W: set at step 0, window after 2 warmup steps, closed after 3; 200 W likewise; the
  // last measurement returns the optimum to set.
  // Per step: what on_step_begin, then on_step_end asked (then, after an "end", what the
  // measurement returned).
  EXPECT_THAT(asked,
              ElementsAre("set 300", "-", "-", "begin", "-", "-", "-", "-", "-", "end", "-",
                          "set 200", "-", "-", "begin", "-", "-", "-", "-", "-", "end", "set 200"));
  EXPECT_EQ(p.optimal_limit_mw(), 200'000);
  EXPECT_TRUE(p.done());
  EXPECT_THROW((void)p.on_window_measured({}), InternalError);
}

TEST(PowerLimitProfiler, ProfilesEachLimitAndKeepsTheCheapest) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  EXPECT_THAT(p.candidates_mw(), ElementsAre(300'000, 250'000, 200'000));
  // 100 iterations per epoch fit two 10+40 windows: 300 and 250 W in epoch 1, 200 W in epoch 2.
  run_epoch(p, host, 100);
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.measurements().size(), 2u);
  run_epoch(p, host, 100);
  ASSERT_TRUE(p.done());
  EXPECT_FALSE(host.straddled);
  EXPECT_EQ(host.windows, 3);
  EXPECT_THAT(host.limits_set, ElementsAre(300'000, 250'000, 200'000, 250'000));
  EXPECT_EQ(p.optimal_limit_mw(), 250'000);
  EXPECT_EQ(host.limit_mw(), 250'000);
  ASSERT_EQ(p.measurements().size(), 3u);
  EXPECT_NEAR(p.measurements()[1].throughput_ips, 9.5, 1e-9);
  EXPECT_NEAR(p.measurements()[1].power_w, 220, 1e-9);

  // The first eval epoch after profiling is measured at the optimal limit.
  host.apply(p, p.on_eval_begin());
  for (int i = 0; i < 19; ++i) {
    host.step();
  }
  host.apply(p, p.on_eval_end(19));
  const PowerProfile profile = p.profile(1024);
  ASSERT_TRUE(profile.eval_throughput_ips.has_value());
  EXPECT_NEAR(*profile.eval_throughput_ips, 9.5, 1e-9);
  EXPECT_NEAR(*profile.eval_power_w, 220, 1e-9);
}

TEST(PowerLimitProfiler, WindowNeverStraddlesAnEpoch) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  // 70 iterations: one 50-iteration window fits, the next does not start in the last 20.
  for (int e = 0; e < 3; ++e) {
    run_epoch(p, host, 70);
    EXPECT_EQ(p.measurements().size(), static_cast<size_t>(e + 1));
  }
  EXPECT_TRUE(p.done());
  EXPECT_FALSE(host.straddled);
}

TEST(PowerLimitProfiler, ShortEpochsShrinkTheWindowInProportion) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  run_epoch(p, host, 25);  // 10+40 shrinks to 5+20
  EXPECT_EQ(p.warmup_iters(), 5);
  EXPECT_EQ(p.profile_iters(), 20);
  EXPECT_EQ(p.measurements().size(), 1u);
  PowerLimitProfiler tiny({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  try {
    (void)tiny.on_epoch_begin(4);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("too short"));
  }
}

TEST(PowerLimitProfiler, EpochEndingEarlyCancelsTheWindowAndRedoesTheLimit) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  ++host.epoch;
  host.apply(p, p.on_epoch_begin(100));
  for (int i = 0; i < 30; ++i) {  // the loader ended after 30 of the 100 announced steps
    host.apply(p, p.on_step_begin());
    host.step();
    host.apply(p, p.on_step_end());
  }
  host.apply(p, p.on_epoch_end());
  EXPECT_TRUE(p.measurements().empty());
  EXPECT_EQ(host.cancelled, 1) << "the open window is cancelled, not measured";
  EXPECT_EQ(host.windows, 0);
  run_epoch(p, host, 100);
  ASSERT_EQ(p.measurements().size(), 2u);
  EXPECT_EQ(p.measurements()[0].power_limit_mw, 300'000);
}

TEST(PowerLimitProfiler, ObserverModeStaysAtTheMaximum) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300),
                       {.step_mw = 50'000, .use_optimal_limit = false});
  run_epoch(p, host, 200);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.optimal_limit_mw(), 250'000);
  EXPECT_EQ(host.limit_mw(), 300'000);
}

TEST(PowerLimitProfiler, LoadedProfileSkipsProfiling) {
  FakeShell host;
  PowerLimitProfiler p({200'000, 300'000}, CostModel(0.5, 300), {.step_mw = 50'000});
  PowerProfile saved;
  saved.global_batch_size = 64;
  for (const auto& m : kThreeLimits) {
    saved.train[m.power_limit_mw] = m;
  }
  saved.optimal_power_limit_mw = 250'000;
  host.apply(p, p.load(saved));
  EXPECT_TRUE(p.done());
  EXPECT_THAT(host.limits_set, ElementsAre(250'000));
}

// Inputs: 1000 J and 10 s so far; next train epoch 100 it at 10 it/s and 200 W (10 s, 2000 J),
// eval 20 it at 20 it/s and 100 W (1 s, 100 J). eta 0.5, MAXPOWER 300:
// predicted = 0.5 * 3100 + 0.5 * 300 * 21 = 4700.
TEST(EarlyStop, PredictionAndBoundary) {
  const CostModel cost(0.5, 300);
  const EpochForecastInputs in{1000, 10, 100, 20, 10, 200, 20, 100};
  const EpochForecast f = forecast_next_epoch(cost, in);
  EXPECT_DOUBLE_EQ(f.next_time_s, 11);
  EXPECT_DOUBLE_EQ(f.next_energy_j, 2100);
  EXPECT_DOUBLE_EQ(f.cost_so_far, 0.5 * 1000 + 0.5 * 300 * 10);
  EXPECT_DOUBLE_EQ(f.predicted_cost, 4700);
  EXPECT_NO_THROW(check_cost_threshold(cost, in, 4700.001));
  EXPECT_NO_THROW(check_cost_threshold(cost, in, kNoCostThreshold));
  try {
    check_cost_threshold(cost, in, 4700);
    FAIL();
  } catch (const CostThresholdExceeded& e) {
    EXPECT_DOUBLE_EQ(e.forecast().predicted_cost, 4700);
    EXPECT_THAT(e.what(), HasSubstr("4700.0"));
  }
}

BatchSizeOptimizer five_sizes(uint64_t seed = 1, int window = 0) {
  return BatchSizeOptimizer({.batch_sizes = {128, 8, 64, 16, 32},
                             .default_batch_size = 32,
                             .beta = 2.0,
                             .seed = seed,
                             .window = window});
}

// Runs `outcomes` (batch size -> (cost, reached)) through the optimizer; returns the order tried.
std::vector<int64_t> drive(BatchSizeOptimizer& bso,
                           const std::map<int64_t, std::pair<double, bool>>& outcomes, int n) {
  std::vector<int64_t> order;
  for (int i = 0; i < n; ++i) {
    const int64_t bs = bso.next_batch_size();
    order.push_back(bs);
    const auto [cost, reached] = outcomes.at(bs);
    bso.observe({bs, cost, reached});
  }
  return order;
}

TEST(BatchSizeOptimizer, PruningGoesDownThenUpAndStopsAtFirstFailure) {
  auto bso = five_sizes();
  const std::map<int64_t, std::pair<double, bool>> outcomes = {
      {8, {50, false}}, {16, {8, true}}, {32, {10, true}}, {64, {12, true}}, {128, {40, false}}};
  // Round 1 from b0 = 32: down 16, 8 (fails); up 64, 128 (fails). Round 2 over {16, 32, 64} from
  // the cheapest survivor 16: nothing below it, then up 32, 64.
  EXPECT_THAT(drive(bso, outcomes, 5), ElementsAre(32, 16, 8, 64, 128));
  EXPECT_TRUE(bso.pruning());
  EXPECT_THAT(drive(bso, outcomes, 3), ElementsAre(16, 32, 64));
  bso.next_batch_size();
  EXPECT_FALSE(bso.pruning());
  EXPECT_THAT(bso.arms(), ElementsAre(16, 32, 64));
  EXPECT_DOUBLE_EQ(bso.min_cost(), 8);
  EXPECT_DOUBLE_EQ(bso.cost_threshold(), 16);
}

TEST(BatchSizeOptimizer, FailureRightBelowDefaultSkipsSmallerSizes) {
  auto bso = five_sizes();
  const std::map<int64_t, std::pair<double, bool>> outcomes = {
      {8, {1, true}}, {16, {20, false}}, {32, {10, true}}, {64, {12, true}}, {128, {14, true}}};
  EXPECT_THAT(drive(bso, outcomes, 4), ElementsAre(32, 16, 64, 128));
}

TEST(BatchSizeOptimizer, FirstRunMustReachWithTheDefault) {
  auto bso = five_sizes();
  EXPECT_EQ(bso.next_batch_size(), 32);
  EXPECT_THROW(bso.observe({32, 10, false}), ConfigError);
  auto other = five_sizes();
  other.next_batch_size();
  EXPECT_THROW(other.observe({64, 10, true}), ConfigError) << "not the pending choice";
}

TEST(BatchSizeOptimizer, PosteriorAfterKnownRewards) {
  auto bso = five_sizes(1, 0);
  const std::map<int64_t, std::pair<double, bool>> outcomes = {
      {8, {50, false}}, {16, {8, true}}, {32, {10, true}}, {64, {12, true}}, {128, {40, false}}};
  drive(bso, outcomes, 8);  // 32 observed twice: costs 10, 10
  const auto p32 = bso.posterior(32);
  ASSERT_TRUE(p32.has_value());
  EXPECT_DOUBLE_EQ(p32->first, -10);
  EXPECT_DOUBLE_EQ(p32->second, 0);
  // 16 costs 8 in round 1 and 12 in round 2.
  auto mixed = five_sizes();
  drive(mixed, outcomes, 5);
  mixed.next_batch_size();  // 16
  mixed.observe({16, 12, true});
  const auto p16 = mixed.posterior(16);
  EXPECT_DOUBLE_EQ(p16->first, -10);
  EXPECT_DOUBLE_EQ(p16->second, 2.0);  // rewards -8, -12: mean -10, var 4, / n = 2
  auto windowed = five_sizes(1, 1);
  drive(windowed, outcomes, 5);
  windowed.next_batch_size();
  windowed.observe({16, 12, true});
  EXPECT_DOUBLE_EQ(windowed.posterior(16)->first, -12);
  EXPECT_DOUBLE_EQ(windowed.posterior(16)->second, 0);
}

TEST(BatchSizeOptimizer, ThompsonExploresEachArmTwiceThenExploitsReproducibly) {
  const std::map<int64_t, std::pair<double, bool>> outcomes = {
      {8, {50, false}}, {16, {8, true}}, {32, {10, true}}, {64, {30, true}}, {128, {40, false}}};
  auto a = five_sizes(7);
  auto b = five_sizes(7);
  const auto order_a = drive(a, outcomes, 60);
  EXPECT_EQ(order_a, drive(b, outcomes, 60)) << "same seed, same decisions";
  // Deterministic costs: zero variance, so exploitation always picks the cheapest arm (16).
  EXPECT_THAT(std::vector(order_a.end() - 10, order_a.end()), ::testing::Each(16));
  // Replaying the history reproduces the state; a foreign history is rejected.
  auto c = five_sizes(7);
  c.replay(a.history());
  EXPECT_EQ(c.next_batch_size(), a.next_batch_size());
  auto d = five_sizes(7);
  auto wrong = a.history();
  wrong[1].batch_size = 64;
  EXPECT_THROW(d.replay(wrong), ConfigError);
}

// A reaching try's reward is its own cost; the threshold uses its whole recurrence's cost, so a
// batch size is not blamed for another one's failure earlier in the same recurrence.
TEST(BatchSizeOptimizer, RecurrenceCostSetsTheThresholdNotTheReward) {
  auto bso = five_sizes();
  bso.next_batch_size();
  bso.observe({32, 10, true, 0});
  EXPECT_DOUBLE_EQ(bso.min_cost(), 10);
  bso.next_batch_size();  // 16
  bso.observe({16, 6, true, 25});
  EXPECT_DOUBLE_EQ(bso.min_cost(), 10) << "16's recurrence cost 25 in all";
  EXPECT_DOUBLE_EQ(bso.posterior(16)->first, -6);
  const auto back = observation_from_json_line(to_json_line({16, 6, true, 25}), "h:1");
  EXPECT_DOUBLE_EQ(back.recurrence_cost, 25);
}

TEST(BatchSizeOptimizer, RejectsBadOptions) {
  EXPECT_THROW(BatchSizeOptimizer({.batch_sizes = {}, .default_batch_size = 1}), ConfigError);
  EXPECT_THROW(BatchSizeOptimizer({.batch_sizes = {8, 16}, .default_batch_size = 32}), ConfigError);
  EXPECT_THROW(BatchSizeOptimizer({.batch_sizes = {8, 16}, .default_batch_size = 8, .beta = 0.5}),
               ConfigError);
  EXPECT_THROW(BatchSizeOptimizer({.batch_sizes = {8, 8}, .default_batch_size = 8}), ConfigError);
}

TEST(BatchSizeHistory, AppendsReadsAndResumes) {
  test::TempDir dir;
  const auto path = dir / "history.jsonl";
  EXPECT_TRUE(read_history(path).empty());
  const std::map<int64_t, std::pair<double, bool>> outcomes = {
      {8, {50, false}}, {16, {8, true}}, {32, {10, true}}, {64, {12, true}}, {128, {40, false}}};
  auto first = five_sizes(3);
  drive(first, outcomes, 12);
  for (const auto& obs : first.history()) {
    append_history(path, obs);
  }
  // A restarted `zeus tune` continues where the first left off.
  auto resumed = five_sizes(3);
  resumed.replay(read_history(path));
  EXPECT_EQ(resumed.next_batch_size(), first.next_batch_size());
  std::ofstream(path, std::ios::app) << "{\"batch_size\": 8}\n";
  try {
    read_history(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":13"));
  }
}

TEST(BatchSizeObservation, JsonLinesRoundTrip) {
  const BatchSizeObservation obs{64, 123.5, true};
  const auto back = observation_from_json_line(to_json_line(obs), "h.jsonl:1");
  EXPECT_EQ(back.batch_size, 64);
  EXPECT_DOUBLE_EQ(back.cost, 123.5);
  EXPECT_TRUE(back.reached);
  try {
    observation_from_json_line(R"({"batch_size": 64})", "h.jsonl:7");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("h.jsonl:7"));
  }
}

}  // namespace
}  // namespace zeus::optimize
