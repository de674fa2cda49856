#include "zeus/launch/c10d/round_keeper.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/overloaded.h"
#include "zeus/launch/round_rules.h"

namespace zeus::launch::c10d {
namespace {

double seconds(std::chrono::milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RoundKeeper::RoundKeeper(RendezvousOptions options, RdzvTime now)
    : o_(std::move(options)), last_join_(now) {
  check_round_sizes(o_);
}

RdzvActions RoundKeeper::connected(PeerId peer, RdzvTime now) {
  Peer p;
  p.last_seen = now;
  peers_[peer] = p;
  return {};
}

RdzvActions RoundKeeper::received(PeerId id, const Message& message, RdzvTime now) {
  RdzvActions out;
  const auto it = peers_.find(id);
  if (it == peers_.end()) {
    return out;
  }
  Peer& p = it->second;
  p.last_seen = now;
  const bool welcomed = p.state != State::kConnected;
  std::visit(
      Overloaded{[&](const Hello& m) {
                   if (welcomed) {
                     drop(id, "sent a second hello", out);
                   } else if (m.run_id != o_.run_id) {
                     out.send.push_back(
                         {id, Refused{fmt::format("this endpoint serves rendezvous id '{}', not "
                                                  "'{}'; give every node the same --rdzv-id",
                                                  o_.run_id, m.run_id)}});
                     out.close.push_back(id);
                     peers_.erase(id);
                   } else {
                     p.state = State::kIdle;
                     out.send.push_back({id, Welcome{o_.run_id}});
                   }
                 },
                 [&](const Join& m) {
                   if (!welcomed) {
                     drop(id, "joined without a hello", out);
                   } else {
                     join(id, p, m, now, out);
                   }
                 },
                 [&](const Failed& m) {
                   if (welcomed) {
                     failed(p, m, out);
                   } else {
                     drop(id, "sent 'failed' before its hello", out);
                   }
                 },
                 [&](const Done&) {
                   if (welcomed) {
                     done(p);
                   } else {
                     drop(id, "sent 'done' before its hello", out);
                   }
                 },
                 [&](const PortReply& m) { port_reply(id, m, out); },
                 [&](const Heartbeat&) {
                   if (!welcomed) {
                     drop(id, "sent a heartbeat before its hello", out);
                   }
                 },
                 [&](const auto& m) {
                   drop(id, fmt::format("sent '{}', which only the server sends", op_name(m)), out);
                 }},
      message);
  maybe_close(now, out);
  return out;
}

RdzvActions RoundKeeper::malformed(PeerId id, const std::string& why, RdzvTime now) {
  RdzvActions out;
  drop(id, why, out);
  maybe_close(now, out);
  return out;
}

RdzvActions RoundKeeper::disconnected(PeerId id, RdzvTime now) {
  RdzvActions out;
  if (peers_.count(id) != 0) {
    drop(id, "", out);
    out.close.erase(std::remove(out.close.begin(), out.close.end(), id), out.close.end());
  }
  maybe_close(now, out);
  return out;
}

RdzvActions RoundKeeper::tick(RdzvTime now) {
  RdzvActions out;
  std::vector<PeerId> silent;
  for (const auto& [id, p] : peers_) {
    if (now - p.last_seen > o_.keep_alive) {
      silent.push_back(id);
    }
  }
  for (PeerId id : silent) {
    drop(id, fmt::format("sent no heartbeat for {:.1f} s", seconds(o_.keep_alive)), out);
  }
  if (!chosen_.empty() && now >= port_deadline_) {
    drop(chosen_.front(),
         fmt::format("did not answer the port request within {:.1f} s", seconds(o_.keep_alive)),
         out);
  }
  maybe_close(now, out);
  return out;
}

void RoundKeeper::join(PeerId id, Peer& p, const Join& m, RdzvTime now, RdzvActions& out) {
  if (aborted_) {
    out.send.push_back({id, Abort{abort_reason_}});
    return;
  }
  if (m.nproc < 1) {
    drop(id, fmt::format("joined with nproc {} (at least 1)", m.nproc), out);
    return;
  }
  if (p.state == State::kChosen || p.state == State::kMember) {
    drop(id, "joined again while in a round", out);
    return;
  }
  p.host = m.host;
  p.nproc = m.nproc;
  p.state = State::kWaiting;
  p.joined_at = now;
  last_join_ = now;
  if (running_ && newcomer_ends_round(o_, count(State::kMember) + count(State::kDone))) {
    end_round(fmt::format("node {} joined", p.host), /*failure=*/false, out);
  }
  tell_waiting(out);
}

void RoundKeeper::failed(Peer& p, const Failed& m, RdzvActions& out) {
  if (p.state != State::kMember) {
    return;
  }
  ++failures_;
  const FailureVerdict verdict =
      count_failure(o_, failures_, fmt::format("{}: {}", who(p), m.reason));
  if (verdict.abort) {
    abort_all(verdict.reason, out);
  } else {
    end_round(verdict.reason, /*failure=*/true, out);
  }
}

void RoundKeeper::done(Peer& p) {
  if (p.state != State::kMember) {
    return;
  }
  p.state = State::kDone;
  if (count(State::kMember) == 0) {
    running_ = false;  // the run is over; nothing more to form
    finished_ = true;
  }
}

void RoundKeeper::port_reply(PeerId id, const PortReply& m, RdzvActions& out) {
  if (chosen_.empty() || chosen_.front() != id || m.round != round_) {
    return;  // a stale answer (the closing was cancelled)
  }
  if (m.port < 1 || m.port > 65535) {
    drop(id, fmt::format("answered the port request with port {}", m.port), out);
    return;
  }
  std::vector<int> nprocs;
  for (PeerId c : chosen_) {
    nprocs.push_back(peers_.at(c).nproc);
  }
  const std::string master = peers_.at(chosen_.front()).host;
  const auto places = layout_round(round_, nprocs, master, m.port);
  for (size_t r = 0; r < chosen_.size(); ++r) {
    Peer& p = peers_.at(chosen_[r]);
    p.state = State::kMember;
    p.node_rank = static_cast<int>(r);
    const RendezvousRound& place = places[r];
    out.send.push_back(
        {chosen_[r], Round{place.round, place.node_rank, place.nnodes, place.world_size,
                           place.first_rank, place.master_addr, place.master_port}});
  }
  logger().info("rendezvous '{}': round {} closed with {} node(s), world size {}, master {}:{}",
                o_.run_id, round_, chosen_.size(), places.front().world_size, master, m.port);
  chosen_.clear();
  ++round_;
  running_ = true;
}

// Removes the peer and closes its connection (why non-empty: the keeper's own decision); a
// member leaving ends the round, a chosen one cancels the closing.
void RoundKeeper::drop(PeerId id, const std::string& why, RdzvActions& out) {
  const auto it = peers_.find(id);
  if (it == peers_.end()) {
    return;
  }
  const Peer p = it->second;
  peers_.erase(it);
  out.close.push_back(id);
  const std::string what = why.empty() ? std::string("left") : why;
  if (p.state == State::kChosen) {
    logger().warn("rendezvous '{}': {} {} while round {} closed", o_.run_id, who(p), what, round_);
    cancel_closing(out);
  } else if (p.state == State::kMember && running_) {
    end_round(fmt::format("{} {}", who(p), what), /*failure=*/false, out);
  } else {
    if (!why.empty()) {
      logger().warn("rendezvous '{}': dropped a connection from {}: {}", o_.run_id,
                    p.host.empty() ? std::string("a peer") : p.host, why);
    }
    if (p.state == State::kWaiting) {
      tell_waiting(out);
    }
  }
}

void RoundKeeper::end_round(const std::string& reason, bool failure, RdzvActions& out) {
  logger().warn(
      "rendezvous '{}': round {} ends: {}{}", o_.run_id, round_ - 1, reason,
      failure ? fmt::format(" (failure {} of {} tolerated)", failures_, o_.max_restarts) : "");
  for (auto& [id, p] : peers_) {
    if (p.state == State::kMember || p.state == State::kDone) {
      p.state = State::kIdle;
      out.send.push_back({id, Restart{reason}});
    }
  }
  running_ = false;
}

void RoundKeeper::abort_all(const std::string& reason, RdzvActions& out) {
  aborted_ = true;
  abort_reason_ = reason;
  chosen_.clear();
  for (auto& [id, p] : peers_) {
    if (p.state != State::kConnected) {
      p.state = State::kIdle;
      out.send.push_back({id, Abort{reason}});
    }
  }
  running_ = false;
}

void RoundKeeper::cancel_closing(RdzvActions& out) {
  for (PeerId c : chosen_) {
    if (const auto it = peers_.find(c); it != peers_.end()) {
      it->second.state = State::kWaiting;
    }
  }
  chosen_.clear();
  tell_waiting(out);
}

void RoundKeeper::maybe_close(RdzvTime now, RdzvActions& out) {
  if (running_ || aborted_ || finished_ || !chosen_.empty()) {
    return;
  }
  const int n = count(State::kWaiting);
  if (!round_closes(o_, n,
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - last_join_))) {
    return;
  }
  // In the order they joined, at most MAX: later ones wait for the next round.
  for (const auto& [id, p] : peers_) {
    if (p.state == State::kWaiting) {
      chosen_.push_back(id);
    }
  }
  std::stable_sort(chosen_.begin(), chosen_.end(), [&](PeerId a, PeerId b) {
    return peers_.at(a).joined_at < peers_.at(b).joined_at;
  });
  chosen_.resize(static_cast<size_t>(round_size(o_, n)));
  for (PeerId c : chosen_) {
    peers_.at(c).state = State::kChosen;
  }
  port_deadline_ = now + o_.keep_alive;
  out.send.push_back({chosen_.front(), PortRequest{round_}});
}

void RoundKeeper::tell_waiting(RdzvActions& out) {
  const int n = count(State::kWaiting) + count(State::kChosen);
  for (const auto& [id, p] : peers_) {
    if (p.state == State::kWaiting) {
      out.send.push_back({id, Waiting{n, o_.min_nodes, o_.max_nodes}});
    }
  }
}

int RoundKeeper::count(State s) const {
  return static_cast<int>(std::count_if(peers_.begin(), peers_.end(),
                                        [s](const auto& e) { return e.second.state == s; }));
}

std::string RoundKeeper::who(const Peer& p) const {
  return fmt::format("node {} ({})", p.node_rank, p.host);
}

}  // namespace zeus::launch::c10d
