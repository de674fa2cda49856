#include "zeus/optimize/batch_size_optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/json.h"
#include "zeus/common/random.h"

namespace zeus::optimize {

std::string to_json_line(const BatchSizeObservation& obs) {
  nlohmann::json j{{"batch_size", obs.batch_size}, {"cost", obs.cost}, {"reached", obs.reached}};
  if (obs.recurrence_cost != 0) {
    j["recurrence_cost"] = obs.recurrence_cost;
  }
  if (obs.epochs != 0) {
    j["epochs"] = obs.epochs;
  }
  return j.dump() + "\n";
}

BatchSizeObservation observation_from_json_line(std::string_view line, std::string_view where) {
  try {
    const auto j = nlohmann::json::parse(line);
    BatchSizeObservation obs{
        json_int(j.at("batch_size"), fmt::format("{}: batch_size", where)),
        j.at("cost").get<double>(), j.at("reached").get<bool>(), j.value("recurrence_cost", 0.0),
        json_int(j.value("epochs", nlohmann::json(0)), fmt::format("{}: epochs", where))};
    if (obs.batch_size <= 0 || obs.epochs < 0 || !std::isfinite(obs.cost) || obs.cost < 0 ||
        !std::isfinite(obs.recurrence_cost) || obs.recurrence_cost < 0) {
      throw ConfigError(fmt::format("{}: batch size {} or cost {} out of range", where,
                                    obs.batch_size, obs.cost));
    }
    return obs;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not a batch-size observation ({})", where, e.what()));
  }
}

BatchSizeOptimizer::BatchSizeOptimizer(BatchSizeOptimizerOptions options)
    : options_(std::move(options)),
      rng_(options_.seed),
      min_cost_(std::numeric_limits<double>::infinity()) {
  auto& sizes = options_.batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  if (sizes.empty() || sizes.front() <= 0 ||
      std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end()) {
    throw ConfigError(fmt::format("batch sizes [{}] must be positive, distinct, and at least one",
                                  fmt::join(sizes, ", ")));
  }
  if (!std::binary_search(sizes.begin(), sizes.end(), options_.default_batch_size)) {
    throw ConfigError(fmt::format("default batch size {} is not among the batch sizes [{}]",
                                  options_.default_batch_size, fmt::join(sizes, ", ")));
  }
  if (!(options_.beta >= 1.0)) {
    throw ConfigError(
        fmt::format("beta {} must be at least 1 (the threshold is beta x the best "
                    "cost so far)",
                    options_.beta));
  }
  if (options_.policy == BsoPolicy::kLean) {
    check_lean_options(options_.lean);
  }
  if (options_.window < 0 || options_.pruning_rounds < 1 || options_.explorations_per_arm < 1) {
    throw ConfigError(
        fmt::format("window {} must be >= 0, pruning rounds {} and explorations per arm {} >= 1",
                    options_.window, options_.pruning_rounds, options_.explorations_per_arm));
  }
  rules_ = PruningRules{.batch_sizes = sizes,
                        .default_batch_size = options_.default_batch_size,
                        .rounds = options_.pruning_rounds,
                        .policy = options_.policy,
                        .lean = options_.lean,
                        .ties = PruningRules::Ties::kFirstTried};
}

double BatchSizeOptimizer::cost_threshold() const {
  return options_.beta * min_cost_;
}

int64_t BatchSizeOptimizer::next_batch_size() {
  if (pending_) {
    return *pending_;
  }
  if (stage_ == Stage::kPruning) {
    const PruningStep step = next_pruning_step(rules_, pruning_tries_);
    if (const auto* next = std::get_if<PruningNext>(&step)) {
      round_ = static_cast<int>(next->round);
      pending_ = next->batch_size;
      pending_cap_ = next->epoch_cap;
      return *pending_;
    }
    if (const auto* stuck = std::get_if<PruningStuck>(&step)) {
      throw ConfigError(fmt::format(
          "no batch size reached the target in pruning round {}: the target is out of reach for "
          "[{}]; lower the target or allow more epochs",
          stuck->round, fmt::join(stuck->candidates, ", ")));
    }
    arms_ = std::get<PruningDone>(step).arms;  // never waiting: one try is out at a time
    stage_ = Stage::kThompson;
  }
  pending_cap_.reset();
  pending_ = thompson_choice();
  return *pending_;
}

void BatchSizeOptimizer::observe(const BatchSizeObservation& obs) {
  if (!pending_ || *pending_ != obs.batch_size) {
    throw ConfigError(
        fmt::format("observed batch size {}, but the optimizer's pending choice is {}",
                    obs.batch_size, pending_ ? std::to_string(*pending_) : std::string("none")));
  }
  if (history_.empty() && !obs.reached) {
    throw ConfigError(fmt::format(
        "the first run, at the default batch size {}, did not reach the target: the job's "
        "target or epoch limit is wrong for it, so no batch size can be judged",
        obs.batch_size));
  }
  pending_.reset();
  pending_cap_.reset();
  history_.push_back(obs);
  double reward_cost = obs.cost;
  if (lean() && !obs.reached && std::isfinite(min_cost_)) {
    // Lean fixes Zeus's latent defect: a try stopped early is no cheaper than the threshold.
    reward_cost = std::max(reward_cost, options_.beta * min_cost_);
  }
  rewards_[obs.batch_size].push_back(-reward_cost);
  if (obs.reached) {
    min_cost_ = std::min(min_cost_, obs.recurrence_cost != 0 ? obs.recurrence_cost : obs.cost);
  }
  if (stage_ == Stage::kPruning) {
    pruning_tries_[obs.batch_size].push_back(
        {.pending = false, .reached = obs.reached, .cost = obs.cost, .epochs = obs.epochs});
  }
}

void BatchSizeOptimizer::replay(const std::vector<BatchSizeObservation>& history) {
  for (size_t i = 0; i < history.size(); ++i) {
    const int64_t chosen = next_batch_size();
    if (chosen != history[i].batch_size) {
      throw ConfigError(fmt::format(
          "history entry {} tried batch size {}, but this optimizer chooses {}: the history was "
          "written with another seed, batch-size list or beta",
          i + 1, history[i].batch_size, chosen));
    }
    observe(history[i]);
  }
}

std::optional<std::pair<double, double>> BatchSizeOptimizer::posterior(int64_t batch_size) const {
  const auto it = rewards_.find(batch_size);
  if (it == rewards_.end() || it->second.empty()) {
    return std::nullopt;
  }
  const GaussianArm arm = this->arm(batch_size);
  // Flat prior (precision 0): the posterior of the mean is N(sample mean, var / n).
  return std::pair{arm.param_mean,
                   std::isfinite(arm.param_precision) ? 1.0 / arm.param_precision : 0.0};
}

GaussianArm BatchSizeOptimizer::arm(int64_t batch_size) const {
  const auto& all = rewards_.at(batch_size);
  const size_t n =
      options_.window > 0 ? std::min(all.size(), static_cast<size_t>(options_.window)) : all.size();
  return fit_gaussian_arm(
      0.0, 0.0, std::vector<double>(all.end() - static_cast<std::ptrdiff_t>(n), all.end()));
}

int64_t BatchSizeOptimizer::thompson_choice() {
  std::vector<int64_t> unexplored;
  for (const int64_t arm : arms_) {
    const auto it = rewards_.find(arm);
    if (it == rewards_.end() ||
        it->second.size() < static_cast<size_t>(options_.explorations_per_arm)) {
      unexplored.push_back(arm);
    }
  }
  if (!unexplored.empty()) {
    return unexplored[uniform_index(rng_, unexplored.size())];
  }
  int64_t best = arms_.front();
  double best_sample = -std::numeric_limits<double>::infinity();
  for (const int64_t arm : arms_) {
    const double sample =
        draw_gaussian_arm(this->arm(arm), lean() ? options_.lean.spread : 0.0, rng_);
    if (sample > best_sample) {
      best_sample = sample;
      best = arm;
    }
  }
  return best;
}

}  // namespace zeus::optimize
