#include "zeus/launch/etcd/round_logic.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "zeus/launch/rendezvous_auth.h"
#include "zeus/launch/round_rules.h"

namespace zeus::launch::etcd {
namespace {

using Goal = Local::Goal;
using std::chrono::milliseconds;

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

// The next state after `s`: the same generation, one step on.
RunState next(const RunState& s) {
  RunState n = s;
  ++n.step;
  return n;
}

RunState fresh(const std::string& generation) {
  RunState s;
  s.generation = generation;
  return s;
}

// Round R+1 open after round R ended for `reason`.
RunState restart(const RunState& s, const std::string& reason) {
  RunState n = next(s);
  n.round = s.round + 1;
  n.phase = Phase::kOpen;
  n.reason = reason;
  n.members.clear();
  n.master_addr.clear();
  n.master_port = 0;
  n.done.clear();
  return n;
}

// The records waiting for `round`, in join order (then by id, for a total order).
std::vector<std::pair<std::string, const NodeRecord*>> waiting_for(const View& view, int round) {
  std::vector<std::pair<std::string, const NodeRecord*>> w;
  for (const auto& [id, r] : view.nodes) {
    if (r.want == round) {
      w.emplace_back(id, &r);
    }
  }
  std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->mod_revision, a.first) < std::tie(b.second->mod_revision, b.first);
  });
  return w;
}

bool contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::optional<size_t> rank_of(const RunState& s, const std::string& id) {
  for (size_t i = 0; i < s.members.size(); ++i) {
    if (s.members[i].id == id) {
      return i;
    }
  }
  return std::nullopt;
}

std::string who(const RunState& s, size_t rank) {
  return fmt::format("node {} ({})", rank, s.members[rank].host);
}

Decision start_generation(const std::string& why) {
  Decision d;
  d.write = fresh(random_hex16());
  d.fresh_generation = true;
  d.log = fmt::format("starts a new run under this id ({})", why);
  return d;
}

Decision repair(const View& view, const Local& me, const std::string& why) {
  Decision d;
  RunState s = *me.known;
  if (view.state && view.state->generation == s.generation) {
    s.step = std::max(s.step, view.state->step);
  }
  ++s.step;
  d.write = s;
  d.repair = true;
  d.log = fmt::format("writes back the run's state (step {}, round {} {}): {}", s.step, s.round,
                      phase_name(s.phase), why);
  return d;
}

// A member of the closed round `s` (at `rank`), running its workers.
Decision as_member(const RendezvousOptions& o, const View& view, const Local& me, const RunState& s,
                   size_t rank) {
  Decision d;
  if (me.failure) {
    RunState n = next(s);
    n.failures = s.failures + 1;
    const FailureVerdict verdict =
        count_failure(o, n.failures, fmt::format("{}: {}", who(s, rank), *me.failure));
    if (verdict.abort) {
      n.phase = Phase::kAborted;
      n.reason = verdict.reason;
    } else {
      n = restart(s, verdict.reason);
      n.failures = s.failures + 1;
    }
    d.write = n;
    d.reports_failure = true;
    d.log = fmt::format(
        "round {} ends: {}{}", s.round, verdict.reason,
        verdict.abort ? ""
                      : fmt::format(" (failure {} of {} tolerated)", n.failures, o.max_restarts));
    return d;
  }
  if (me.done) {
    RunState n = next(s);
    if (!contains(n.done, me.id)) {
      n.done.push_back(me.id);
    }
    if (n.done.size() == s.members.size()) {
      n.phase = Phase::kFinished;
    }
    d.write = n;
    d.reports_done = true;
    d.log = fmt::format("{}'s workers are done{}", who(s, rank),
                        n.phase == Phase::kFinished ? ": the run is finished" : "");
    return d;
  }
  for (size_t r = 0; r < s.members.size(); ++r) {
    const Member& m = s.members[r];
    if (m.id == me.id || contains(s.done, m.id)) {
      continue;
    }
    if (view.nodes.count(m.id) == 0 && view.vouched.count(m.id) == 0) {
      const std::string reason = fmt::format(
          "{} left: its lease ended (its launcher stopped, or was silent for read_timeout {:.1f} "
          "s)",
          who(s, r), seconds(o.keep_alive));
      d.write = restart(s, reason);
      d.departed = m.id;
      d.log = fmt::format("round {} ends: {}", s.round, reason);
      return d;
    }
    if (me.lost && *me.lost == m.id) {
      const std::string reason =
          fmt::format("{} left: its launcher's link closed (it stopped)", who(s, r));
      d.write = restart(s, reason);
      d.log = fmt::format("round {} ends: {}", s.round, reason);
      return d;
    }
  }
  if (newcomer_ends_round(o, static_cast<int>(s.members.size()))) {
    for (const auto& [id, waiting] : waiting_for(view, s.round + 1)) {
      if (!rank_of(s, id)) {
        const std::string reason = fmt::format("node {} joined", waiting->host);
        d.write = restart(s, reason);
        d.log = fmt::format("round {} ends: {}", s.round, reason);
        return d;
      }
    }
  }
  return d;
}

// The open round `s`: this node waits in it, and closes it when the rules say so.
Decision in_open_round(const RendezvousOptions& o, const View& view, const Local& me,
                       const RunState& s, milliseconds since_grew) {
  Decision d;
  const auto mine = view.nodes.find(me.id);
  if (mine == view.nodes.end() || mine->second.want != s.round) {
    d.want = s.round;
    return d;
  }
  const auto w = waiting_for(view, s.round);
  const int n = static_cast<int>(w.size());
  if (!round_closes(o, n, since_grew)) {
    if (const auto delay = close_delay(o, n)) {
      d.wake_in = std::max(milliseconds(0), *delay - since_grew);
    }
    return d;
  }
  const int size = round_size(o, n);
  const auto chosen_end = w.begin() + size;
  if (std::none_of(w.begin(), chosen_end, [&](const auto& e) { return e.first == me.id; })) {
    return d;  // a chosen node closes it; this one waits for the next round
  }
  RunState c = next(s);
  c.phase = Phase::kClosed;
  c.members.push_back({me.id, me.node.host, me.node.nproc, me.link_port});
  for (auto it = w.begin(); it != chosen_end; ++it) {
    if (it->first != me.id) {
      c.members.push_back({it->first, it->second->host, it->second->nproc, it->second->link_port});
    }
  }
  c.master_addr = me.node.host;
  d.write = c;
  d.pick_port = true;
  d.log = fmt::format("closes round {} with {} node(s) (as node 0, the workers' master)", s.round,
                      size);
  return d;
}

}  // namespace

int waiting_count(const View& view) {
  if (!view.state || view.state->phase != Phase::kOpen) {
    return 0;
  }
  return static_cast<int>(waiting_for(view, view.state->round).size());
}

Decision decide(const RendezvousOptions& o, const View& view, const Local& me,
                milliseconds since_grew) {
  if (me.goal == Goal::kIdle || me.goal == Goal::kDone) {
    return {};
  }
  const bool joining = me.goal == Goal::kJoin;
  // A node in a run (its record alive under the generation of the newest state it knew) holds
  // that run's state against deletion, forgery and replay.
  const bool anchored = me.known && view.my_record_alive && me.generation == me.known->generation;
  if (!view.state_present) {
    if (anchored) {
      return repair(view, me, "it was deleted");
    }
    return joining ? start_generation("no run's state") : Decision{};
  }
  if (view.state_status != RecordStatus::kValid) {
    if (anchored) {
      return repair(view, me, view.state_problem);
    }
    if (!joining) {
      return {};
    }
    if (view.state_status == RecordStatus::kMalformed) {
      return start_generation(fmt::format("the state there is unreadable: {}", view.state_problem));
    }
    Decision d;
    d.refuse = fmt::format("the run's state is {}", view.state_problem);
    return d;
  }
  const RunState& s = *view.state;
  if (anchored && (s.generation != me.generation || s.step < me.known->step)) {
    return repair(view, me,
                  s.generation != me.generation
                      ? fmt::format("a state of generation {} replaced it", s.generation)
                      : fmt::format("an older state (step {}) was written back", s.step));
  }

  if (s.generation != me.generation) {
    if (!joining) {
      Decision d;
      d.notice = RendezvousNotice{RendezvousNotice::Kind::kAbort,
                                  "this node lost its place in the run: its record in etcd is "
                                  "gone, and the run's state is of another run under this id"};
      return d;
    }
    // Joining: this generation's run, unless it is over or abandoned.
    const bool over = s.phase == Phase::kFinished || s.phase == Phase::kAborted;
    if (view.nodes.empty()) {
      return start_generation(over ? fmt::format("the run before was {}", phase_name(s.phase))
                                   : "the run before was abandoned: none of its nodes is alive");
    }
    if (over) {
      return {};  // its nodes are leaving; their records go with them
    }
    Decision d;
    d.want = s.phase == Phase::kOpen ? s.round : s.round + 1;
    return d;
  }

  const std::optional<size_t> rank = rank_of(s, me.id);
  Decision d;
  switch (s.phase) {
    case Phase::kOpen:
      if (joining) {
        return in_open_round(o, view, me, s, since_grew);
      }
      if (me.round < s.round) {
        d.notice = RendezvousNotice{RendezvousNotice::Kind::kRestart, s.reason};
      }
      return d;
    case Phase::kClosed:
      if (joining) {
        if (rank) {
          std::vector<int> nprocs;
          for (const Member& m : s.members) {
            nprocs.push_back(m.nproc);
          }
          d.joined = layout_round(s.round, nprocs, s.master_addr, s.master_port)[*rank];
          return d;
        }
        const auto mine = view.nodes.find(me.id);
        if (mine == view.nodes.end() || mine->second.want < s.round + 1) {
          d.want = s.round + 1;
          return d;
        }
        if (newcomer_ends_round(o, static_cast<int>(s.members.size()))) {
          const std::string reason = fmt::format("node {} joined", me.node.host);
          d.write = restart(s, reason);
          d.log = fmt::format("round {} ends: {}", s.round, reason);
        }
        return d;
      }
      if (me.goal == Goal::kRun && rank && me.round == s.round) {
        return as_member(o, view, me, s, *rank);
      }
      if (me.round < s.round || !rank) {
        d.notice = RendezvousNotice{RendezvousNotice::Kind::kRestart, s.reason};
      }
      return d;
    case Phase::kFinished:
      if (joining) {
        d.refuse = "the run finished: every node of its last round completed";
      } else if (!rank || me.round < s.round) {
        d.notice =
            RendezvousNotice{RendezvousNotice::Kind::kAbort, "the run finished without this node"};
      }
      return d;
    case Phase::kAborted:
      if (joining) {
        d.refuse = fmt::format("the run was aborted: {}", s.reason);
      } else {
        d.notice = RendezvousNotice{RendezvousNotice::Kind::kAbort, s.reason};
      }
      return d;
  }
  return d;
}

}  // namespace zeus::launch::etcd
