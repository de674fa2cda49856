#include "zeus/launch/round_rules.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/errors.h"

namespace zeus::launch {

void check_round_sizes(const RendezvousOptions& o) {
  if (o.min_nodes < 1 || o.max_nodes < o.min_nodes) {
    throw ConfigError(
        fmt::format("--nnodes {}:{}: MIN must be >= 1 and <= MAX", o.min_nodes, o.max_nodes));
  }
}

std::optional<std::chrono::milliseconds> close_delay(const RendezvousOptions& o, int waiting) {
  if (waiting >= o.max_nodes) {
    return std::chrono::milliseconds(0);
  }
  if (waiting >= o.min_nodes) {
    return o.last_call;
  }
  return std::nullopt;
}

bool round_closes(const RendezvousOptions& o, int waiting,
                  std::chrono::milliseconds since_last_join) {
  const auto delay = close_delay(o, waiting);
  return delay && since_last_join >= *delay;
}

int round_size(const RendezvousOptions& o, int waiting) {
  return std::min(waiting, o.max_nodes);
}

bool newcomer_ends_round(const RendezvousOptions& o, int members) {
  return members < o.max_nodes;
}

FailureVerdict count_failure(const RendezvousOptions& o, int failures, const std::string& why) {
  if (failures > o.max_restarts) {
    return {true, fmt::format("{}; {} failure(s) exceed --max-restarts {}", why, failures,
                              o.max_restarts)};
  }
  return {false, why};
}

std::vector<RendezvousRound> layout_round(int round, const std::vector<int>& nprocs,
                                          const std::string& master_addr, int master_port) {
  int world = 0;
  for (int n : nprocs) {
    world += n;
  }
  std::vector<RendezvousRound> out;
  int first = 0;
  for (size_t r = 0; r < nprocs.size(); ++r) {
    out.push_back({round, static_cast<int>(r), static_cast<int>(nprocs.size()), world, first,
                   master_addr, master_port});
    first += nprocs[r];
  }
  return out;
}

}  // namespace zeus::launch
