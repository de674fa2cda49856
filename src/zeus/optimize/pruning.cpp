#include "zeus/optimize/pruning.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace zeus::optimize {

PruningStep next_pruning_step(const PruningRules& rules,
                              const std::map<int64_t, std::vector<PruningTry>>& tries) {
  const bool lean = rules.policy == BsoPolicy::kLean;
  const LeanOptions& l = rules.lean;
  int64_t start = rules.default_batch_size;
  std::vector<int64_t> candidates = rules.batch_sizes;
  for (int64_t round = 0; round < rules.rounds; ++round) {
    std::vector<int64_t> down;
    std::vector<int64_t> up;
    for (const int64_t bs : candidates) {
      (bs <= start ? down : up).push_back(bs);
    }
    std::reverse(down.begin(), down.end());           // from the start downward
    std::vector<std::pair<int64_t, double>> reached;  // this round's, in the order tried
    double round_best = std::numeric_limits<double>::infinity();
    for (const auto* direction : {&down, &up}) {
      int expensive_streak = 0;
      int64_t last_epochs = 0;  // of the last size this way that reached
      for (const int64_t bs : *direction) {
        const auto it = tries.find(bs);
        const auto made = it == tries.end() ? 0 : static_cast<int64_t>(it->second.size());
        if (made <= round) {
          PruningNext next{bs, std::nullopt, round + 1};
          if (lean && l.cap > 0 && direction == &down && last_epochs > 0) {
            next.epoch_cap = std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(l.cap * static_cast<double>(last_epochs))));
          }
          return next;
        }
        const PruningTry& t = it->second[static_cast<size_t>(round)];
        if (t.pending) {
          return PruningWaiting{start};
        }
        if (!t.reached) {
          break;  // the first failure ends the direction
        }
        reached.emplace_back(bs, t.cost);
        last_epochs = t.epochs;
        const bool is_start = direction == &down && bs == down.front();
        if (lean && l.gamma > 0 && !is_start) {
          // Lean: reaching, but far above the round's best `patience` times in a row: the
          // sizes further this way are unlikely to do better.
          expensive_streak = t.cost > l.gamma * round_best ? expensive_streak + 1 : 0;
        }
        round_best = std::min(round_best, t.cost);
        if (lean && l.gamma > 0 && expensive_streak >= l.patience) {
          break;
        }
      }
    }
    if (reached.empty()) {
      return PruningStuck{round + 1, candidates};
    }
    if (rules.ties == PruningRules::Ties::kSmallest) {
      std::stable_sort(reached.begin(), reached.end());
    }
    const auto best = std::min_element(reached.begin(), reached.end(), [](auto& a, auto& b) {
      return a.second < b.second;  // strict: ties to the first in `reached`'s order
    });
    start = best->first;
    const double best_cost = best->second;
    candidates.clear();
    const bool retried = round + 1 < rules.rounds;
    for (const auto& [bs, cost] : reached) {
      // Lean: a survivor far from the round's best is not worth a second round.
      if (lean && l.retry > 0 && retried && cost > l.retry * best_cost) {
        continue;
      }
      candidates.push_back(bs);
    }
    std::sort(candidates.begin(), candidates.end());
  }
  return PruningDone{candidates};
}

}  // namespace zeus::optimize
