// The pruning stage of the batch-size optimizer, once for both of upstream's variants (the
// paper's optimizer, BatchSizeOptimizer; and its server's, bso_server_rules): a pure function
// of the tries so far. Each round walks down from its start (the default batch size, then the
// previous round's cheapest) until a size fails to reach the target, then up from the start;
// the sizes that reached survive into the next round; after the last round they are the arms of
// the Thompson stage. Lean's rules (bso_policy.h) end a direction after expensive tries, skip
// far-off survivors, and cap the epochs of a downward try.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <variant>
#include <vector>

#include "zeus/optimize/bso_policy.h"

namespace zeus::optimize {

// One try of a batch size in the pruning stage.
struct PruningTry {
  bool pending = false;  // handed out, no result yet (the server's Dispatched trial)
  bool reached = false;  // reached the target (within the cost bound)
  double cost = 0;       // this try's own cost
  int64_t epochs = 0;    // epochs it ran; 0: unknown
};

struct PruningRules {
  std::vector<int64_t> batch_sizes;  // ascending, distinct
  int64_t default_batch_size = 0;    // one of batch_sizes
  int64_t rounds = 2;
  BsoPolicy policy = BsoPolicy::kZeus;
  LeanOptions lean;
  // The next round's start among equally cheap survivors: the first tried (the paper's
  // optimizer) or the smallest batch size (the server's).
  enum class Ties { kFirstTried, kSmallest } ties = Ties::kFirstTried;
};

// Try this batch size next (lean: within `epoch_cap` epochs).
struct PruningNext {
  int64_t batch_size = 0;
  std::optional<int64_t> epoch_cap;
  int64_t round = 1;
};
// A try of this round is still out; `round_start` is the round's start.
struct PruningWaiting {
  int64_t round_start = 0;
};
// Pruning is over: the arms of the Thompson stage, ascending.
struct PruningDone {
  std::vector<int64_t> arms;
};
// No size reached the target in `round` (1-based) over `candidates`: nothing can be judged.
struct PruningStuck {
  int64_t round = 1;
  std::vector<int64_t> candidates;
};
using PruningStep = std::variant<PruningNext, PruningWaiting, PruningDone, PruningStuck>;

// `tries`: every pruning try of each batch size, in the order made (the k-th is round k's).
PruningStep next_pruning_step(const PruningRules& rules,
                              const std::map<int64_t, std::vector<PruningTry>>& tries);

}  // namespace zeus::optimize
