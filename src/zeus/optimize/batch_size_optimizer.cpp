#include "zeus/optimize/batch_size_optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "zeus/common/errors.h"
#include "zeus/common/json.h"

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
  round_list_ = sizes;
  round_start_ = options_.default_batch_size;
}

double BatchSizeOptimizer::cost_threshold() const {
  return options_.beta * min_cost_;
}

std::optional<int64_t> BatchSizeOptimizer::next_pruning_candidate() {
  while (true) {
    switch (phase_) {
      case Phase::kStart:
        return round_start_;
      case Phase::kDown: {
        // The largest size below the last one tried downwards.
        const auto it = std::lower_bound(round_list_.begin(), round_list_.end(), last_tried_);
        if (it != round_list_.begin()) {
          return *(it - 1);
        }
        phase_ = Phase::kUp;
        last_tried_ = round_start_;
        break;
      }
      case Phase::kUp: {
        const auto it = std::upper_bound(round_list_.begin(), round_list_.end(), last_tried_);
        if (it != round_list_.end()) {
          return *it;
        }
        return std::nullopt;
      }
    }
  }
}

void BatchSizeOptimizer::end_round() {
  if (round_survivors_.empty()) {
    throw ConfigError(fmt::format(
        "no batch size reached the target in pruning round {}: the target is out of reach for "
        "[{}]; lower the target or allow more epochs",
        round_, fmt::join(round_list_, ", ")));
  }
  std::vector<int64_t> survivors;
  for (const auto& [bs, cost] : round_survivors_) {
    survivors.push_back(bs);
  }
  if (round_ < options_.pruning_rounds) {
    const double best_cost = round_survivors_.at(round_best_batch_size_);
    if (lean() && options_.lean.retry > 0) {
      // Lean: a survivor far from the round's best is not worth a second try.
      std::erase_if(survivors, [&](int64_t bs) {
        return round_survivors_.at(bs) > options_.lean.retry * best_cost;
      });
    }
    ++round_;
    round_list_ = survivors;
    round_start_ = round_best_batch_size_;
    phase_ = Phase::kStart;
    round_survivors_.clear();
    expensive_streak_ = 0;
    down_epochs_ = 0;
    return;
  }
  arms_ = survivors;
  stage_ = Stage::kThompson;
}

int64_t BatchSizeOptimizer::next_batch_size() {
  if (pending_) {
    return *pending_;
  }
  if (stage_ == Stage::kPruning) {
    std::optional<int64_t> candidate = next_pruning_candidate();
    if (!candidate) {
      end_round();
      return next_batch_size();
    }
    pending_ = candidate;
    pending_cap_.reset();
    if (lean() && options_.lean.cap > 0 && phase_ == Phase::kDown && down_epochs_ > 0) {
      pending_cap_ = std::max<int64_t>(
          1,
          static_cast<int64_t>(std::ceil(options_.lean.cap * static_cast<double>(down_epochs_))));
    }
    return *pending_;
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
    observe_pruning(obs);
  }
}

void BatchSizeOptimizer::end_direction() {
  expensive_streak_ = 0;
  if (phase_ == Phase::kDown) {
    phase_ = Phase::kUp;
    last_tried_ = round_start_;
  } else {
    last_tried_ = round_list_.back();
  }
}

void BatchSizeOptimizer::observe_pruning(const BatchSizeObservation& obs) {
  const double round_best = round_survivors_.empty() ? std::numeric_limits<double>::infinity()
                                                     : round_survivors_.at(round_best_batch_size_);
  if (obs.reached) {
    round_survivors_[obs.batch_size] = obs.cost;
    if (obs.cost < round_best) {
      round_best_batch_size_ = obs.batch_size;  // ties: the first tried, as in Zeus
    }
  }
  if (phase_ == Phase::kStart) {
    // As in Zeus, the round's start is the first size of its downward list: when it fails (a
    // round-2 start can), the round goes on upwards.
    phase_ = obs.reached ? Phase::kDown : Phase::kUp;
    last_tried_ = round_start_;
    down_epochs_ = obs.reached ? obs.epochs : 0;
    return;
  }
  if (!obs.reached) {
    end_direction();  // the first failure ends the direction
    return;
  }
  last_tried_ = obs.batch_size;
  if (phase_ == Phase::kDown) {
    down_epochs_ = obs.epochs;
  }
  if (lean() && options_.lean.gamma > 0) {
    // Lean: reaching, but at a price far above the round's best, `patience` times in a row:
    // further sizes in this direction are unlikely to do better.
    expensive_streak_ = obs.cost > options_.lean.gamma * round_best ? expensive_streak_ + 1 : 0;
    if (expensive_streak_ >= options_.lean.patience) {
      end_direction();
    }
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
  const auto& all = it->second;
  const size_t n =
      options_.window > 0 ? std::min(all.size(), static_cast<size_t>(options_.window)) : all.size();
  const auto first = all.end() - static_cast<std::ptrdiff_t>(n);
  const double mean = std::accumulate(first, all.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (auto r = first; r != all.end(); ++r) {
    var += (*r - mean) * (*r - mean);
  }
  var /= static_cast<double>(n);  // population variance; the reward precision is 1 / var
  // Flat prior (precision 0): the posterior of the mean is N(sample mean, var / n).
  return std::pair{mean, var / static_cast<double>(n)};
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
    std::uniform_int_distribution<size_t> pick(0, unexplored.size() - 1);
    return unexplored[pick(rng_)];
  }
  int64_t best = arms_.front();
  double best_sample = -std::numeric_limits<double>::infinity();
  for (const int64_t arm : arms_) {
    const auto [mean, var] = *posterior(arm);
    double sample = mean;
    if (var > 0) {
      const double spread = lean() ? options_.lean.spread : 1.0;
      std::normal_distribution<double> normal(mean, spread * std::sqrt(var));
      sample = normal(rng_);
    }
    if (sample > best_sample) {
      best_sample = sample;
      best = arm;
    }
  }
  return best;
}

}  // namespace zeus::optimize
