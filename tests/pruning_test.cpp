// The pruning stage is written once (optimize/pruning.h) for upstream's two variants: the
// paper's optimizer and its server's rules hand out the same tries for the same outcomes, and
// differ only where upstream's do (which equally cheap survivor starts the next round).
#include "zeus/optimize/pruning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/optimize/bso_server_rules.h"

namespace zeus::optimize {
namespace {

using ::testing::ElementsAre;

// A workload: sizes below 16 never reach the target; the cost is smallest at 64.
bool reaches(int64_t bs) {
  return bs >= 16;
}
double cost_of(int64_t bs) {
  return 100.0 + static_cast<double>((bs - 64) * (bs - 64)) / 16.0;
}

TEST(Pruning, ThePapersOptimizerAndTheServerHandOutTheSameTries) {
  const std::vector<int64_t> sizes{8, 16, 32, 64, 128, 256};
  for (const BsoPolicy policy : {BsoPolicy::kZeus, BsoPolicy::kLean}) {
    SCOPED_TRACE(std::string(to_string(policy)));
    BatchSizeOptimizer paper({.batch_sizes = sizes, .default_batch_size = 128, .policy = policy});
    std::vector<int64_t> paper_tries;
    while (paper.pruning()) {
      const int64_t bs = paper.next_batch_size();
      if (!paper.pruning()) {
        break;
      }
      paper_tries.push_back(bs);
      paper.observe({.batch_size = bs, .cost = cost_of(bs), .reached = reaches(bs), .epochs = 10});
    }

    bso::Job job;
    job.params.batch_sizes = sizes;
    job.params.default_batch_size = 128;
    job.params.eta_knob = 1.0;  // cost = energy
    job.params.max_power_w = 1;
    job.params.policy.policy = policy;
    std::vector<int64_t> server_tries;
    while (true) {
      const auto step = bso::next_pruning_step(job);
      if (std::holds_alternative<bso::StartMab>(step)) {
        EXPECT_EQ(std::get<bso::StartMab>(step).arms, paper.arms());
        break;
      }
      const int64_t bs = std::get<bso::NewTrial>(step).batch_size;
      server_tries.push_back(bs);
      bso::Trial t;
      t.trial_number = static_cast<int64_t>(job.trials.size()) + 1;
      t.batch_size = bs;
      t.status = bso::TrialStatus::kSucceeded;
      t.energy_j = cost_of(bs);
      t.time_s = 0;
      t.converged = reaches(bs);
      t.epochs = 10;
      job.trials.push_back(t);
    }
    EXPECT_EQ(paper_tries, server_tries);
    EXPECT_FALSE(paper_tries.empty());
  }
}

TEST(Pruning, TheNextRoundStartsAtTheCheapestWithEachVariantsTies) {
  PruningRules rules{.batch_sizes = {16, 32, 64}, .default_batch_size = 32, .rounds = 2};
  // Round 1 tried 32 (the start), then 16, then 64; 32 and 16 cost the same, 64 more. Round 2
  // starts at the cheapest.
  const std::map<int64_t, std::vector<PruningTry>> tie{{32, {{.reached = true, .cost = 5}}},
                                                       {16, {{.reached = true, .cost = 5}}},
                                                       {64, {{.reached = true, .cost = 9}}}};
  rules.ties = PruningRules::Ties::kFirstTried;  // the paper's: the one tried first
  auto next = std::get<PruningNext>(next_pruning_step(rules, tie));
  EXPECT_EQ(next.batch_size, 32);
  EXPECT_EQ(next.round, 2);
  rules.ties = PruningRules::Ties::kSmallest;  // the server's: the smaller size
  EXPECT_EQ(std::get<PruningNext>(next_pruning_step(rules, tie)).batch_size, 16);
  // A try still out: wait at the round's start; no size reached: stuck, naming the round.
  EXPECT_EQ(
      std::get<PruningWaiting>(next_pruning_step(rules, {{32, {{.pending = true}}}})).round_start,
      32);
  const auto stuck = std::get<PruningStuck>(next_pruning_step(rules, {{32, {{}}}, {64, {{}}}}));
  EXPECT_EQ(stuck.round, 1);
  EXPECT_THAT(stuck.candidates, ElementsAre(16, 32, 64));
}

}  // namespace
}  // namespace zeus::optimize
