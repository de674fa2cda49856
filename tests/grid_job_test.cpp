// A zeus::DataLoader job whose power limit follows the grid (ZEUS_CARBON_INTENSITY /
// ZEUS_ELECTRICITY_PRICE, job/grid_limits.h) on a simulated V100: the limit it keeps at a low and
// at a high intensity is the rule's on the job's own profile, a change of the signal moves it
// within the interval, each epoch's gCO2eq is its energy times the intensity, and a provider that
// breaks mid-run leaves the job running on the last value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "support/sim_job.h"
#include "support/test_support.h"
#include "support/thread_world.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"
#include "zeus/grid/signal_trace.h"
#include "zeus/job/collectives.h"
#include "zeus/job/energy_job.h"
#include "zeus/optimize/grid_rule.h"
#include "zeus/optimize/power_profile.h"
#include "zeus/report/report.h"

using ::testing::HasSubstr;
using namespace std::chrono_literals;

namespace zeus::job {
namespace {

// Hourly rows from an hour ago to two hours ahead, all at `value`.
std::string rows_around_now(double value, std::string_view column = "carbonIntensity") {
  const auto hour = std::chrono::floor<std::chrono::hours>(std::chrono::system_clock::now());
  std::string text = fmt::format("datetime,{}\n", column);
  for (int h = -1; h <= 2; ++h) {
    text += fmt::format("{},{}\n", grid::format_iso8601(hour + std::chrono::hours(h)), value);
  }
  return text;
}

// The train steps of one epoch: 30 profile all seven limits at 1 + 2 iterations each, with
// room for a grid reading after (kGridCheckSteps = 50 counts only steps after profiling).
constexpr int kSteps = 60;

struct GridJob {
  test::TempDir dir;
  std::filesystem::path trace = dir / "ci.csv";
  SingleProcess world;

  JobOptions options() const {
    JobOptions o = test::quick_sim_job(dir.path());
    o.device = "sim:v100:cifar100:1024";
    o.grid.poll = 5ms;
    o.grid.interval = std::chrono::hours(1);
    return o;
  }

  // Waits for the poller's next reads to have seen the file (it reads every 5 ms).
  static void let_the_poller_read() { std::this_thread::sleep_for(100ms); }

  // Runs the job for `epochs` epochs of kSteps train steps; `after_epoch` runs between them.
  contract::TrainResult run(const JobOptions& o, int epochs,
                            const std::function<void(int)>& after_epoch = {}) {
    EnergyJob job(resolve_job_options(o, epochs, 16, 1), world);
    let_the_poller_read();
    while (auto epoch = job.next_epoch()) {
      test::run_epoch(job, kSteps, 5, 0.5);
      if (after_epoch) {
        after_epoch(*epoch);
      }
      let_the_poller_read();
    }
    return *job.result();
  }

  std::vector<optimize::LimitMeasurement> profile() const {
    const auto p = optimize::power_profile_from_json(
        read_file(contract::power_profile_path(dir.path(), 16)), "profile");
    std::vector<optimize::LimitMeasurement> m;
    for (const auto& [mw, x] : p.train) {
      m.push_back(x);
    }
    return m;
  }
};

TEST(GridJob, TheLimitFollowsTheIntensityOnTheJobsOwnProfile) {
  GridJob g;
  write_file_atomic(g.trace, rows_around_now(100));
  JobOptions o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  o.grid.signal_max = optimize::kChaseMaxCarbon;  // a fixed reference: the rule's arithmetic
  const std::optional<contract::TrainResult> result = g.run(o, 3, [&](int epoch) {
    if (epoch == 1) {
      write_file_atomic(g.trace, rows_around_now(3000));  // the grid got dirty: > 10%
    }
  });
  ASSERT_TRUE(result && result->grid);
  const contract::GridSummary& grid = *result->grid;
  EXPECT_EQ(grid.signal, "carbon_intensity");
  EXPECT_EQ(grid.unit, "gCO2eq");
  EXPECT_TRUE(grid.followed);
  const auto profile = g.profile();
  const double max_power_w = result->max_power_w;
  const int64_t clean = optimize::select_grid_limit(profile, 0.5, max_power_w, 100, 750);
  const int64_t dirty = optimize::select_grid_limit(profile, 0.5, max_power_w, 3000, 750);
  const int64_t zeus = *result->optimal_power_limit_mw;
  ASSERT_GT(clean, zeus);  // the profile makes the test meaningful: the signal moves the limit
  ASSERT_LT(dirty, clean);
  ASSERT_GE(grid.choices.size(), 2u);
  EXPECT_EQ(grid.choices[0].signal, 100);
  EXPECT_EQ(grid.choices[0].power_limit_mw, clean);
  EXPECT_EQ(grid.choices.back().signal, 3000);
  EXPECT_EQ(grid.choices.back().power_limit_mw, dirty);
  EXPECT_THAT(grid.choices.back().reason, HasSubstr("moved"));
  ASSERT_EQ(result->epochs.size(), 3u);
  // An epoch's limit is the one at its end: the first reading (at epoch 0's end) chose the
  // clean limit; the dirty one came at epoch 1's end, within the interval, and stayed.
  EXPECT_EQ(result->epochs[0].power_limit_mw, clean);
  EXPECT_EQ(result->epochs[1].power_limit_mw, dirty);
  EXPECT_EQ(result->epochs[2].power_limit_mw, dirty);
  const auto& e1 = result->epochs[1];  // ran at the clean limit, under 100 g/kWh
  ASSERT_TRUE(e1.grid_amount);
  EXPECT_NEAR(*e1.grid_amount, (e1.train_energy_j + e1.eval_energy_j) / 3.6e6 * 100,
              1e-9 * *e1.grid_amount);
  // Each epoch's gCO2eq: its energy at the intensity it ran under.
  const auto& e2 = result->epochs[2];
  ASSERT_TRUE(e2.grid_amount);
  EXPECT_NEAR(*e2.grid_amount, (e2.train_energy_j + e2.eval_energy_j) / 3.6e6 * 3000,
              1e-9 * *e2.grid_amount);
  double total = 0;
  for (const auto& e : result->epochs) {
    total += e.grid_amount.value_or(0);
  }
  EXPECT_NEAR(grid.amount, total, 1e-12 * total);
  // The estimate against Zeus's fixed limit: epoch 1's train steps at the clean limit under 100,
  // epoch 2's at the dirty one under 3000, each per step by the profile.
  auto at = [&](int64_t mw) {
    return *std::find_if(profile.begin(), profile.end(),
                         [&](const auto& m) { return m.power_limit_mw == mw; });
  };
  auto joules = [&](int64_t mw) { return at(mw).power_w / at(mw).throughput_ips; };
  auto seconds = [&](int64_t mw) { return 1.0 / at(mw).throughput_ips; };
  const double saving = kSteps * (joules(zeus) - joules(clean)) / 3.6e6 * 100 +
                        kSteps * (joules(zeus) - joules(dirty)) / 3.6e6 * 3000;
  EXPECT_NEAR(grid.estimated_saving, saving, 1e-9 * std::abs(saving));
  EXPECT_NEAR(grid.estimated_time_saving_s,
              kSteps * (seconds(zeus) - seconds(clean)) + kSteps * (seconds(zeus) - seconds(dirty)),
              1e-9);
  // The file round-trips.
  const auto again = contract::train_result_from_json(contract::to_json(*result), "again");
  ASSERT_TRUE(again.grid);
  EXPECT_EQ(again.grid->choices.size(), grid.choices.size());
  EXPECT_EQ(again.epochs[2].grid_amount, e2.grid_amount);
  EXPECT_THAT(contract::summary_line(*result), HasSubstr("gCO2eq over the epochs"));
  // zeus report: the epochs' gCO2eq and the rule's choices.
  const auto run_dir = report::load_run(g.dir.path());
  EXPECT_THAT(report::to_markdown(run_dir), HasSubstr("| metric | gCO2eq |"));
  EXPECT_THAT(report::to_markdown(run_dir), HasSubstr(fmt::format("| {:.4g} |", *e2.grid_amount)));
  EXPECT_THAT(report::to_html(run_dir), HasSubstr("following it saved (estimate)"));
}

TEST(GridJob, ATraceThatReachesAheadIsTheForecastTheRuleChoosesOn) {
  GridJob g;
  // Clean until this hour ends, dirty after: the next hour's mean (the interval) lies between.
  const auto hour = std::chrono::floor<std::chrono::hours>(std::chrono::system_clock::now());
  std::string text = "datetime,carbonIntensity\n";
  for (int h = -1; h <= 2; ++h) {
    text += fmt::format("{},{}\n", grid::format_iso8601(hour + std::chrono::hours(h)),
                        h <= 0 ? 100 : 3000);
  }
  write_file_atomic(g.trace, text);
  JobOptions o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  o.grid.signal_max = optimize::kChaseMaxCarbon;
  const std::optional<contract::TrainResult> result = g.run(o, 2);
  ASSERT_TRUE(result && result->grid);
  ASSERT_FALSE(result->grid->choices.empty());
  const auto& first = result->grid->choices[0];
  EXPECT_GT(first.signal, 100);  // not the value now
  EXPECT_LT(first.signal, 3000);
  EXPECT_THAT(first.reason, HasSubstr("forecast"));
  EXPECT_EQ(first.power_limit_mw,
            optimize::select_grid_limit(g.profile(), 0.5, result->max_power_w, first.signal, 750));
}

// Issue #52: the default reference is the grid's own, its mean over the last day. A day at 100
// before an hour at 300: that hour is dirty for this grid, and the limit goes below Zeus's (under
// Chase's 750 it would go above: 300 is clean by that measure). On a grid flat at any level the
// choice is Zeus's.
TEST(GridJob, ByDefaultTheReferenceIsTheGridsOwnDay) {
  GridJob g;
  const auto hour = std::chrono::floor<std::chrono::hours>(std::chrono::system_clock::now());
  std::string text = "datetime,carbonIntensity\n";
  for (int h = -24; h <= 2; ++h) {
    text += fmt::format("{},{}\n", grid::format_iso8601(hour + std::chrono::hours(h)),
                        h < 0 ? 100 : 300);
  }
  write_file_atomic(g.trace, text);
  test::ScopedEnv unset("ZEUS_MAX_CARBON_INTENSITY", std::nullopt);
  JobOptions o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  const std::optional<contract::TrainResult> result = g.run(o, 2);
  ASSERT_TRUE(result && result->grid);
  EXPECT_EQ(result->grid->signal_max, optimize::kGridReference);
  ASSERT_FALSE(result->grid->choices.empty());
  const auto& first = result->grid->choices[0];
  const double minutes =
      std::chrono::duration<double>(std::chrono::system_clock::now() - hour).count() / 60;
  EXPECT_GT(first.reference, 100);  // the day before now: mostly 100, the hour so far 300
  EXPECT_LT(first.reference, 100 + 200 * (minutes + 2) / (24 * 60));
  EXPECT_THAT(first.reason, HasSubstr("the grid's reference"));
  const int64_t zeus = *result->optimal_power_limit_mw;
  EXPECT_EQ(first.power_limit_mw, optimize::select_grid_limit(g.profile(), 0.5, result->max_power_w,
                                                              first.signal, first.reference));
  EXPECT_LT(first.power_limit_mw, zeus) << "300 is dirty against this grid's day";
  EXPECT_GT(optimize::select_grid_limit(g.profile(), 0.5, result->max_power_w, 300, 750), zeus)
      << "under Chase's reference the same hour would run faster than Zeus";
  // A flat grid: Zeus's choice throughout.
  GridJob flat;
  write_file_atomic(flat.trace, rows_around_now(300));
  o = flat.options();
  o.grid.carbon_intensity = flat.trace.string();
  const contract::TrainResult level = flat.run(o, 2);
  ASSERT_TRUE(level.grid && !level.grid->choices.empty());
  for (const auto& e : level.epochs) {
    EXPECT_EQ(e.power_limit_mw, *level.optimal_power_limit_mw);
  }
}

TEST(GridJob, AtTheReferenceTheLimitIsZeusAndABrokenTraceKeepsTheLastValue) {
  GridJob g;
  write_file_atomic(g.trace, rows_around_now(750));
  JobOptions o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  o.grid.signal_max = optimize::kChaseMaxCarbon;
  const std::optional<contract::TrainResult> result = g.run(o, 3, [&](int epoch) {
    if (epoch == 0) {
      write_file_atomic(g.trace, "not,a trace\n");  // the provider now fails
    }
  });
  ASSERT_TRUE(result && result->grid);
  EXPECT_EQ(result->num_epochs, 3);
  EXPECT_GT(result->grid->provider_failures, 0);
  for (const auto& e : result->epochs) {
    EXPECT_EQ(e.power_limit_mw, *result->optimal_power_limit_mw);
    ASSERT_TRUE(e.grid_amount);
    EXPECT_NEAR(*e.grid_amount, (e.train_energy_j + e.eval_energy_j) / 3.6e6 * 750, 1e-6);
  }
}

TEST(GridJob, MeasuringOnlyCountsThePriceAndMovesNothing) {
  GridJob g;
  write_file_atomic(g.trace, rows_around_now(0.25, "price_per_kwh"));
  JobOptions o = g.options();
  o.measure_only = true;
  o.grid.electricity_price = g.trace.string();
  o.grid.signal_max = 0.5;
  const std::optional<contract::TrainResult> result = g.run(o, 2);
  ASSERT_TRUE(result && result->grid);
  EXPECT_FALSE(result->grid->followed);
  EXPECT_TRUE(result->grid->choices.empty());
  EXPECT_EQ(result->grid->unit, "$");
  const auto& e = result->epochs[1];
  EXPECT_NEAR(*e.grid_amount, (e.train_energy_j + e.eval_energy_j) / 3.6e6 * 0.25, 1e-9);
}

TEST(GridJob, BadSignalsAreRefusedNamingTheVariable) {
  GridJob g;
  write_file_atomic(g.trace, rows_around_now(100));
  auto refused = [&](JobOptions o, const char* says) {
    try {
      resolve_job_options(o, 1, 16, 1);
      ADD_FAILURE() << "accepted; expected " << says;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(says));
    }
  };
  JobOptions o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  o.grid.electricity_price = g.trace.string();
  refused(o, "both set");
  {
    test::ScopedEnv chase("ZEUS_MAX_PRICE", "chase");  // Chase's 750 is a carbon intensity
    o = g.options();
    o.grid.electricity_price = g.trace.string();
    refused(o, "ZEUS_MAX_PRICE='chase'");
  }
  {
    test::ScopedEnv bad("ZEUS_MAX_CARBON_INTENSITY", "lots");
    o = g.options();
    o.grid.carbon_intensity = g.trace.string();
    refused(o, "ZEUS_MAX_CARBON_INTENSITY='lots'");
  }
  o = g.options();
  o.grid.carbon_intensity = (g.dir / "missing.csv").string();
  refused(o, "missing.csv");
  o = g.options();
  o.grid.carbon_intensity = "https://api.electricitymap.org/v3";
  refused(o, "ZEUS_CARBON_LOCATION");
  o.grid.location = "north";
  refused(o, "ZEUS_CARBON_LOCATION='north'");
  // A trace that does not parse fails the job at its start, naming the file.
  write_file_atomic(g.trace, "datetime,carbonIntensity\nnoon,3\n");
  o = g.options();
  o.grid.carbon_intensity = g.trace.string();
  try {
    EnergyJob job(resolve_job_options(o, 1, 16, 1), g.world);
    ADD_FAILURE() << "the job started";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ci.csv"));
  }
}

}  // namespace
}  // namespace zeus::job

namespace zeus::job {
namespace {

// Two ranks, the second GPU 20% slower, planning per GPU: the grid's reading is rank 0's on
// every rank, and the per-GPU plan is made again at the signal's knob.
TEST(GridJob, PerGpuPlansFollowTheSignalOnEveryRank) {
  GridJob g;
  write_file_atomic(g.trace, rows_around_now(100));
  test::ScopedEnv no_state("ZEUS_SIM_STATE", std::nullopt);
  test::ScopedEnv no_plan("ZEUS_POWER_LIMIT_PLAN", std::nullopt);
  test::ThreadWorld threads(2, 2);
  std::vector<contract::TrainResult> results(2);
  const auto errors = test::run_ranks(threads, [&](int rank, Collectives& c) {
    JobOptions o = g.options();
    o.grid.signal_max = optimize::kChaseMaxCarbon;
    o.device = "sim:v100,v100*1.2:cifar100:1024";
    o.grid.carbon_intensity = g.trace.string();
    EnergyJob job(resolve_job_options(o, 3, 16, 2), c);
    while (auto epoch = job.next_epoch()) {
      test::run_epoch(job, kSteps, 5, 0.5);
      if (rank == 0 && *epoch == 1) {
        write_file_atomic(g.trace, rows_around_now(3000));
      }
      if (rank == 0) {
        GridJob::let_the_poller_read();
      }
    }
    results[static_cast<size_t>(rank)] = *job.result();
  });
  for (const auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  for (const auto& r : results) {
    ASSERT_TRUE(r.grid);
    EXPECT_EQ(r.power_limit_plan, "per_gpu");
    EXPECT_EQ(r.power_limits_mw, results[0].power_limits_mw);  // one plan on every rank
    ASSERT_EQ(r.grid->choices.size(), results[0].grid->choices.size());
    EXPECT_EQ(r.grid->choices.back().signal, 3000);
  }
  const auto& r = results[0];
  // The plan was made again when the grid got dirty, and ended lower than at 100 g/kWh.
  ASSERT_FALSE(r.replans.empty());
  EXPECT_THAT(r.replans.back().reason, HasSubstr("grid's signal moved Zeus's knob"));
  const auto& clean = r.replans.front().power_limits_mw;
  const auto& dirty = r.power_limits_mw;
  EXPECT_LE(dirty[0], clean[0]);
  EXPECT_LT(dirty[0] + dirty[1], clean[0] + clean[1]);
}

}  // namespace
}  // namespace zeus::job
