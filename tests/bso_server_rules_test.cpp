// The decisions of Zeus 0.16's batch-size server (optimize/bso_server_rules.h), checked against
// ref-zeus016.md section 2.6 on hand-built job states.
#include "zeus/optimize/bso_server_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace zeus::optimize::bso {
namespace {

using ::testing::HasSubstr;

JobParams params() {
  JobParams p;
  p.job_id = "mnist-1";
  p.job_id_prefix = "mnist";
  p.batch_sizes = {64, 8, 32, 16};
  p.default_batch_size = 16;
  p.max_power_w = 300;
  p.number_of_gpus = 1;
  p.gpu_model = "NVIDIA A40";
  validate(p);
  return p;
}

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const BsoError& e) {
    return e.http_status();
  }
  return 0;
}

TEST(BsoServerRules, ValidationSortsAndNamesTheField) {
  JobParams p = params();
  EXPECT_EQ(p.batch_sizes, (std::vector<int64_t>{8, 16, 32, 64}));
  const auto message = [](JobParams q) {
    try {
      validate(q);
    } catch (const BsoError& e) {
      EXPECT_EQ(e.http_status(), 422);
      return std::string(e.what());
    }
    return std::string();
  };
  JobParams q = p;
  q.default_batch_size = 24;
  EXPECT_THAT(message(q), HasSubstr("default_batch_size: 24"));
  q = p;
  q.job_id = "other-1";
  EXPECT_THAT(message(q), HasSubstr("job_id_prefix 'mnist'"));
  q = p;
  q.eta_knob = 1.5;
  EXPECT_THAT(message(q), HasSubstr("eta_knob"));
  q = p;
  q.beta_knob = 0.0;
  EXPECT_THAT(message(q), HasSubstr("beta_knob"));
  q = p;
  q.batch_sizes = {8, 8, 16};
  EXPECT_THAT(message(q), HasSubstr("repeat"));
  q = p;
  q.beta_knob = std::nullopt;  // no early stop: valid
  EXPECT_EQ(message(q), "");
}

Job job_with_trial(TrialStatus status = TrialStatus::kDispatched) {
  Job job;
  job.params = params();
  job.trials.push_back({1, 16, TrialType::kExploration, status, {}, {}, {}});
  return job;
}

TEST(BsoServerRules, AReportKeepsTrainingUntilTheTargetOrMaxEpochs) {
  Job job = job_with_trial();
  Report r{1, 16, 10.0, 1000.0, 0.3, 1};
  ReportDecision d = decide_report(job, r);
  EXPECT_FALSE(d.stop_train);
  EXPECT_EQ(d.message, "Stop condition not met, keep training");
  EXPECT_FALSE(d.finished);

  r.metric = 0.6;  // reached (higher is better, target 0.5)
  d = decide_report(job, r);
  ASSERT_TRUE(d.stop_train && d.converged && d.finished);
  EXPECT_EQ(d.message, "Train succeeded");
  EXPECT_EQ(d.finished->status, TrialStatus::kSucceeded);
  EXPECT_EQ(d.finished->converged, true);
  // 0.5 * 1000 J + 0.5 * 300 W * 10 s.
  EXPECT_DOUBLE_EQ(*d.new_min_cost, 2000.0);
  EXPECT_EQ(d.new_min_cost_batch_size, 16);

  r.metric = 0.3;
  r.current_epoch = 100;  // max_epochs
  d = decide_report(job, r);
  EXPECT_TRUE(d.stop_train);
  EXPECT_FALSE(d.converged);
  EXPECT_EQ(d.message, "Train failed to converge within max_epoch(100)");
  EXPECT_DOUBLE_EQ(*d.new_min_cost, 2000.0) << "a lower cost counts even without converging";

  job.params.higher_is_better_metric = false;  // e.g. a loss: 0.3 <= 0.5 reached
  r.current_epoch = 1;
  EXPECT_TRUE(decide_report(job, r).converged);
}

TEST(BsoServerRules, ACostBeyondBetaTimesTheMinimumStopsUnconverged) {
  Job job = job_with_trial();
  job.min_cost = 500.0;  // bound: 2 * 500 = 1000
  const ReportDecision d = decide_report(job, {1, 16, 10.0, 1000.0, 0.9, 1});
  EXPECT_TRUE(d.stop_train);
  EXPECT_FALSE(d.converged) << "reached, but too expensive";
  EXPECT_THAT(d.message, HasSubstr("exceeded the cost upper bound"));
  EXPECT_FALSE(d.new_min_cost);
  job.params.beta_knob = std::nullopt;  // early stop disabled
  EXPECT_TRUE(decide_report(job, {1, 16, 10.0, 1000.0, 0.9, 1}).converged);
}

TEST(BsoServerRules, UnknownAndAlreadyReportedTrials) {
  Job job = job_with_trial(TrialStatus::kSucceeded);
  job.trials[0].converged = true;
  const ReportDecision d = decide_report(job, {1, 16, 1, 1, 0, 1});
  EXPECT_TRUE(d.stop_train && d.converged);
  EXPECT_EQ(d.message, "Result for this trial(1) is already reported.");
  EXPECT_FALSE(d.finished);
  EXPECT_EQ(status_of([&] { decide_report(job, {7, 16, 1, 1, 0, 1}); }), 400);
  EXPECT_EQ(status_of([&] { decide_report(job, {1, 32, 1, 1, 0, 1}); }), 400);
}

// Drives the pruning stage as the service would: each new trial is dispatched, and (unless
// `hold` says to leave it out) reported at once with the outcome `costs` gives its batch size
// (nullopt: it did not converge).
struct Driver {
  Job job;
  std::map<int64_t, std::optional<double>> costs;
  std::vector<std::pair<TrialType, int64_t>> handed_out;

  std::variant<NewTrial, StartMab> step(bool hold = false) {
    auto next = next_pruning_step(job);
    if (const auto* t = std::get_if<NewTrial>(&next)) {
      handed_out.emplace_back(t->type, t->batch_size);
      Trial trial{static_cast<int64_t>(job.trials.size()) + 1,
                  t->batch_size,
                  t->type,
                  TrialStatus::kDispatched,
                  {},
                  {},
                  {}};
      trial.epoch_cap = t->epoch_cap;
      trial.epochs = 1;
      job.trials.push_back(trial);
      if (!hold) {
        finish(job.trials.back());
      }
    }
    return next;
  }
  void finish(Trial& trial) {
    const auto cost = costs.at(trial.batch_size);
    // time 1 s and energy chosen so that zeus_cost = cost (eta 0.5, 300 W): E = 2*cost - 300.
    const double energy = 2 * cost.value_or(1000.0) - 300.0;
    const ReportDecision d =
        decide_report(job, {trial.trial_number, trial.batch_size, 1.0, energy, cost ? 0.9 : 0.1,
                            cost ? 1 : job.params.max_epochs});
    trial = *d.finished;
    if (d.new_min_cost) {
      job.min_cost = d.new_min_cost;
      job.min_cost_batch_size = d.new_min_cost_batch_size;
    }
  }
};

TEST(BsoServerRules, PruningGoesDownThenUpForTwoRoundsThenStartsTheMab) {
  Driver d{.job = {.params = params()}};
  d.job.params.beta_knob = std::nullopt;  // outcomes as given, no early stop
  d.costs = {{8, std::nullopt}, {16, 500.0}, {32, 400.0}, {64, std::nullopt}};

  // The default first; while it is out, a concurrent job runs the default too.
  EXPECT_EQ(std::get<NewTrial>(d.step(/*hold=*/true)).batch_size, 16);
  const NewTrial concurrent = std::get<NewTrial>(d.step(/*hold=*/true));
  EXPECT_EQ(concurrent.type, TrialType::kConcurrent);
  EXPECT_EQ(concurrent.batch_size, 16);
  d.finish(d.job.trials[0]);
  d.finish(d.job.trials[1]);  // a concurrent trial is not an exploration

  std::variant<NewTrial, StartMab> step;
  do {
    step = d.step();
  } while (std::holds_alternative<NewTrial>(step));
  // Round 1: 16, 8 (fails: down ends), 32, 64 (fails: up ends). Round 2 from 32 (cheapest)
  // over {16, 32}: 32, 16 downward.
  const std::vector<std::pair<TrialType, int64_t>> expected = {
      {TrialType::kExploration, 16}, {TrialType::kConcurrent, 16},  {TrialType::kExploration, 8},
      {TrialType::kExploration, 32}, {TrialType::kExploration, 64}, {TrialType::kExploration, 32},
      {TrialType::kExploration, 16}};
  EXPECT_EQ(d.handed_out, expected);
  EXPECT_EQ(std::get<StartMab>(step).arms, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(d.job.min_cost_batch_size, 32);
}

TEST(BsoServerRules, ARoundWithNothingConvergedIsUpstreamsError) {
  Driver d{.job = {.params = params()}};
  d.costs = {{8, std::nullopt}, {16, std::nullopt}, {32, std::nullopt}, {64, std::nullopt}};
  d.step();  // 16, which fails: the downward walk ends
  d.step();  // 32, which fails: the upward walk ends
  try {
    d.step();
    FAIL() << "expected upstream's 500";
  } catch (const BsoError& e) {
    EXPECT_EQ(e.http_status(), 500);
    EXPECT_THAT(e.what(), HasSubstr("No converged batch sizes"));
  }
}

TEST(BsoServerRules, GaussianArmsFitAndTheMabExploresThenSamples) {
  JobParams p = params();
  const ArmState flat = fit_arm(p, {-5.0, -5.0});
  EXPECT_TRUE(std::isinf(flat.param_precision));
  EXPECT_DOUBLE_EQ(flat.param_mean, -5.0);
  const ArmState arm = fit_arm(p, {-4.0, -6.0});  // var 1, precision 0 + 2 * 1
  EXPECT_DOUBLE_EQ(arm.reward_precision, 1.0);
  EXPECT_DOUBLE_EQ(arm.param_precision, 2.0);
  EXPECT_DOUBLE_EQ(arm.param_mean, -5.0);
  EXPECT_EQ(arm.num_observations, 2);

  Job job{.params = p, .stage = Stage::kMab};
  job.arms[16] = fit_arm(p, {});
  job.arms[32] = fit_arm(p, {-1.0, -1.5});
  std::mt19937_64 rng(7);
  EXPECT_EQ(predict_mab(job, rng), 16) << "16 is short of its two explorations";
  job.arms[16] = fit_arm(p, {-1000.0, -1001.0});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(predict_mab(job, rng), 32) << "the cheaper arm wins every draw";
  }

  // Refits use the MAB trials of that batch size, newest last, windowed.
  job.params.window_size = 2;
  job.trials.push_back({1, 32, TrialType::kMab, TrialStatus::kSucceeded, 1.0, 100.0, true});
  job.trials.push_back({2, 32, TrialType::kExploration, TrialStatus::kSucceeded, 1.0, 7.0, true});
  job.trials.push_back({3, 32, TrialType::kMab, TrialStatus::kSucceeded, 1.0, 300.0, true});
  const auto rewards = arm_rewards(job, 32, 42.0);
  ASSERT_EQ(rewards.size(), 2u);
  EXPECT_DOUBLE_EQ(rewards[0], -zeus_cost(job.params, 300.0, 1.0));
  EXPECT_DOUBLE_EQ(rewards[1], -42.0);
}

JobParams lean_params(bool lean) {
  JobParams p = params();
  p.default_batch_size = 64;
  p.beta_knob = std::nullopt;  // outcomes as given
  if (lean) {
    p.policy = parse_policy_choice("lean", "");  // gamma 1.5, patience 1, retry 1.25, cap 1.1
  }
  return p;
}

std::vector<int64_t> prune(Driver& d) {
  std::variant<NewTrial, StartMab> step;
  do {
    step = d.step();
  } while (std::holds_alternative<NewTrial>(step));
  return std::get<StartMab>(step).arms;
}

// Costs rise as the batch size falls: upstream's pruning tries every size twice; lean stops going
// down at the first size that costs more than 1.5x the round's best, and retries only the sizes
// within 1.25x of it.
TEST(BsoServerRules, LeanEndsAnExpensiveDirectionAndRetriesOnlyCheapSurvivors) {
  const std::map<int64_t, std::optional<double>> costs{
      {64, 100.0}, {32, 200.0}, {16, 300.0}, {8, 400.0}};
  Driver zeus{.job = {.params = lean_params(false)}, .costs = costs};
  EXPECT_EQ(prune(zeus), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(zeus.handed_out.size(), 8u);

  Driver lean{.job = {.params = lean_params(true)}, .costs = costs};
  EXPECT_EQ(prune(lean), (std::vector<int64_t>{64}));
  const std::vector<std::pair<TrialType, int64_t>> expected = {
      {TrialType::kExploration, 64}, {TrialType::kExploration, 32}, {TrialType::kExploration, 64}};
  EXPECT_EQ(lean.handed_out, expected);
}

TEST(BsoServerRules, LeanCapsADownwardTrialAtTheEpochsTheLargerSizeNeeded) {
  for (const bool is_lean : {false, true}) {
    Job job{.params = lean_params(is_lean)};
    Trial first{1, 64, TrialType::kExploration, TrialStatus::kSucceeded, 1.0, 100.0, true};
    first.epochs = 4;
    job.trials.push_back(first);
    job.min_cost = zeus_cost(job.params, 100.0, 1.0);
    const NewTrial next = std::get<NewTrial>(next_pruning_step(job));
    EXPECT_EQ(next.batch_size, 32);
    if (!is_lean) {
      EXPECT_FALSE(next.epoch_cap) << "upstream caps nothing but max_epochs";
      continue;
    }
    ASSERT_EQ(next.epoch_cap, 5) << "ceil(1.1 x 4)";
    Trial second{2, 32, TrialType::kExploration, TrialStatus::kDispatched};
    second.epoch_cap = next.epoch_cap;
    job.trials.push_back(second);
    EXPECT_FALSE(decide_report(job, {2, 32, 1.0, 10.0, 0.1, 4}).stop_train);
    const ReportDecision capped = decide_report(job, {2, 32, 1.0, 10.0, 0.1, 5});
    EXPECT_TRUE(capped.stop_train);
    EXPECT_FALSE(capped.converged);
    EXPECT_THAT(capped.message, HasSubstr("epoch cap(5)"));
    EXPECT_EQ(capped.finished->epochs, 5);
  }
}

// Lean's bandit: a trial stopped unconverged counts as costing at least beta x min_cost.
TEST(BsoServerRules, LeanCountsAnUnconvergedBanditTrialAsNoCheaperThanTheBound) {
  for (const bool is_lean : {false, true}) {
    Job job{.params = lean_params(is_lean)};
    job.params.beta_knob = 2.0;
    job.stage = Stage::kMab;
    job.min_cost = 300.0;
    Trial t{1, 32, TrialType::kMab, TrialStatus::kSucceeded, 1.0, 2 * 100.0 - 300.0, false};
    job.trials.push_back(t);  // cost 100, not converged
    const std::vector<double> rewards = arm_rewards(job, 32, std::nullopt);
    ASSERT_EQ(rewards.size(), 1u);
    EXPECT_DOUBLE_EQ(rewards[0], is_lean ? -600.0 : -100.0);
  }
}

}  // namespace
}  // namespace zeus::optimize::bso
