// The batch-size optimizer's policies: `zeus`, the paper's algorithm decision for decision, and
// `lean`, this project's, which spends less in the pruning stage (docs/optimizer.md, "--policy
// lean"). A policy and its knobs are part of a recurring job's identity: a history written
// under one cannot be resumed under another.
#pragma once

#include <string>
#include <string_view>

namespace zeus::optimize {

enum class BsoPolicy { kZeus, kLean };

// Lean's knobs. The defaults were chosen by bench/lean_knobs.py on the simulator's seeds 1..50
// only (a grid of 1800 combinations over all 24 GPU x workload cells), and reported on seeds
// 51..100 (bench/README.md). A knob at 0 turns its rule off (spread 1 is Zeus's posterior).
struct LeanOptions {
  // A pruning direction ends once `patience` reaching tries in a row each cost more than
  // `gamma` x the cheapest reaching try of the round so far.
  double gamma = 1.5;
  int patience = 1;
  // Round 2 re-tries only round 1's survivors that cost at most `retry` x its cheapest.
  double retry = 1.25;
  // On a downward scan, a try may run at most ceil(`cap` x the epochs the larger batch size
  // just tried needed to reach the target); reaching it counts as a failure.
  double cap = 1.1;
  // The Thompson posterior's standard deviation is multiplied by `spread` (Zeus: 1).
  double spread = 0.25;
  // Always on in lean (a latent defect of Zeus's Thompson stage): the reward of a try that did
  // not reach the target counts its cost as at least beta x min_cost, so a batch size that
  // is early-stopped cheaply never looks cheap.

  bool operator==(const LeanOptions&) const = default;
};

std::string_view to_string(BsoPolicy policy);
// "zeus" or "lean"; throws ConfigError naming the text and the choices.
BsoPolicy parse_policy(std::string_view text);

// "gamma=1.5,patience=1,retry=1.25,cap=1.1,spread=0.25": every knob, in this order.
std::string to_string(const LeanOptions& lean);
// Applies "key=value,..." over `base` (any subset, any order; "" leaves it). Throws ConfigError
// naming the bad key or value and the accepted ranges.
LeanOptions parse_lean_options(std::string_view text, LeanOptions base = {});
// The ranges parse_lean_options() accepts, for knobs set in code. Throws ConfigError naming the
// knob and its value.
void check_lean_options(const LeanOptions& lean);

// A policy and its knobs from the command line's --policy and --lean. Throws ConfigError for an
// unknown policy, bad knobs, or knobs without --policy lean.
struct PolicyChoice {
  BsoPolicy policy = BsoPolicy::kZeus;
  LeanOptions lean;

  bool operator==(const PolicyChoice&) const = default;
};
PolicyChoice parse_policy_choice(std::string_view policy, std::string_view lean);
// "zeus", or "lean (gamma=...,spread=...)": what a tune history and a table header record.
std::string policy_label(const PolicyChoice& choice);

}  // namespace zeus::optimize
