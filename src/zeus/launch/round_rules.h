// The rules of a rendezvous round that every backend keeps (torchrun's dynamic rendezvous), as
// pure functions, so that the launcher-hosted c10d keeper (c10d/round_keeper.h) and etcd's
// distributed decisions (etcd/round_logic.h) cannot drift apart:
//   - a round closes when MAX nodes joined, or MIN or more and `last_call` passed since the last
//     join; those beyond MAX, in join order, wait for the next round;
//   - node ranks follow the members' order; node 0's host and port are the workers' master;
//   - while a round runs, a newcomer ends it when the round has room (fewer than MAX members,
//     finished ones included); a member that leaves ends it too;
//   - a member's failed workers end it and count against max_restarts; past it, the run aborts.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "zeus/launch/rendezvous.h"

namespace zeus::launch {

// Throws ConfigError when MIN < 1 or MAX < MIN.
void check_round_sizes(const RendezvousOptions& o);

// Whether `waiting` nodes, the last of which joined `since_last_join` ago, close the round now.
bool round_closes(const RendezvousOptions& o, int waiting,
                  std::chrono::milliseconds since_last_join);
// How long after the last join a round of `waiting` nodes closes (0: now); nullopt while fewer
// than MIN wait.
std::optional<std::chrono::milliseconds> close_delay(const RendezvousOptions& o, int waiting);
// How many of `waiting` nodes the closing round takes (the first ones in join order).
int round_size(const RendezvousOptions& o, int waiting);

// Whether a newcomer ends a running round of `members` nodes (done ones included).
bool newcomer_ends_round(const RendezvousOptions& o, int members);

// What one more failure does: `failures` counts it already.
struct FailureVerdict {
  bool abort = false;
  std::string reason;  // `why`, and the count against --max-restarts when it aborts
};
FailureVerdict count_failure(const RendezvousOptions& o, int failures, const std::string& why);

// Every member's place in a closed round, from the members' nproc in node-rank order.
std::vector<RendezvousRound> layout_round(int round, const std::vector<int>& nprocs,
                                          const std::string& master_addr, int master_port);

}  // namespace zeus::launch
