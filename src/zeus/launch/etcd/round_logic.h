// The etcd rendezvous's decisions, as one pure function of what a node sees in etcd and what it
// is doing. No node is special: every node runs the same decisions on the same state, any of
// them may make a change, and etcd's compare-and-swap on the state's mod_revision lets exactly
// one of several concurrent changes through (the others see the new state and decide again).
// The rules are every backend's (round_rules.h).
//
// Note [etcd rendezvous]
//   1. A node finds no state, or the state of a run that is over (finished or aborted) or
//      abandoned (none of its nodes' records is alive): it starts a new generation, open for
//      round 0, putting its own record in the same transaction (so that a second newcomer sees
//      a live run, not an abandoned one).
//   2. Open round R: a joining node's record says want = R. When the waiting records close the
//      round (MAX, or MIN and last_call since the set last grew, as each node sees it), a chosen
//      node writes the closed round: itself as node 0 (its host and a port it just found free are
//      the workers' master), then the others in join order (their records' mod_revision).
//   3. Closed round R: its members run their workers. A member writes round R+1 open (a
//      restart, with the reason) when another member's record is gone (its lease ended: the
//      launcher stopped, or was silent for read_timeout), when its ring successor's link closed
//      (etcd/link.h), or when a newcomer waits (want = R+1) and the round has room; its own
//      failure likewise, counted, or the run aborted past max_restarts; its done, and finished
//      once every member is done.
//   4. A member sees a state past its round: a notice (restart or abort), and it joins again.
//   5. Within a generation the state's step only grows: a member that sees the state absent,
//      unreadable, not signed with the token, of another generation or with a smaller step
//      than the newest it knew, writes that newest back (a repair; Note [rendezvous
//      authentication]). A joining node that cannot read the state refuses to join, saying why.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "zeus/launch/etcd/records.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch::etcd {

// What the node sees in etcd at one revision.
struct View {
  // The state as read: status kValid with `state`, or what is wrong with it; absent: no key.
  bool state_present = false;
  RecordStatus state_status = RecordStatus::kValid;
  std::string state_problem;
  std::optional<RunState> state;
  int64_t state_mod_revision = 0;  // the compare-and-swap's expectation (0: absent)
  // The valid, live records under the state's generation, by node id.
  std::map<std::string, NodeRecord> nodes;
  // Members whose record is gone or unreadable but whose lease etcd still keeps: someone else
  // deleted or overwrote the record; they have not left.
  std::set<std::string> vouched;
  // This node's own record (in its own generation) is alive: its lease holds.
  bool my_record_alive = false;
};

// What this node is doing.
struct Local {
  std::string id;
  RendezvousNode node;
  int link_port = 0;
  enum class Goal { kIdle, kJoin, kRun, kFailed, kDone } goal = Goal::kIdle;
  std::string generation;              // the generation it is in (empty: none yet)
  int round = -1;                      // kRun, kFailed, kDone: its round
  std::optional<std::string> failure;  // kRun: a failure to write
  bool done = false;                   // kRun: its done to write
  std::optional<std::string> lost;     // kRun: the member whose link closed
  std::optional<RunState> known;       // the newest valid state of its generation it saw
};

struct Decision {
  // A compare-and-swap of the state: against view.state_mod_revision.
  std::optional<RunState> write;
  bool fresh_generation = false;  // `write` starts a generation: put this node's record with it
  bool pick_port = false;         // `write` closes a round as node 0: a free port goes in first
  std::optional<std::string> departed;  // `write` says this member left (its record is gone)
  bool reports_failure = false;         // `write` is this node's failure
  bool reports_done = false;            // `write` is this node's done
  bool repair = false;                  // `write` puts back the newest state this node knew
  std::optional<int> want;              // put this node's record waiting for this round
  std::optional<RendezvousRound> joined;
  std::optional<RendezvousNotice> notice;
  std::optional<std::string> refuse;  // joining is impossible: why (a DistError for join())
  std::optional<std::chrono::milliseconds> wake_in;  // decide again then at the latest
  std::string log;                                   // what the write does, for the log
  // Nothing to do until etcd changes or wake_in passes.
  bool idle() const { return !write && !want && !joined && !notice && !refuse; }
};

// `since_grew`: how long ago the waiting set of the open round last grew, as this node saw it.
Decision decide(const RendezvousOptions& o, const View& view, const Local& me,
                std::chrono::milliseconds since_grew);

// How many records wait for the open round of `view` (0 when it is not open).
int waiting_count(const View& view);

}  // namespace zeus::launch::etcd
