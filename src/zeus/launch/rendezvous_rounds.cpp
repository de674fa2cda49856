#include "zeus/launch/rendezvous_rounds.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::launch {
namespace {

double seconds(std::chrono::milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

RoundKeeper::RoundKeeper(RendezvousOptions options, RdzvTime now)
    : o_(std::move(options)), last_join_(now) {
  if (o_.min_nodes < 1 || o_.max_nodes < o_.min_nodes) {
    throw ConfigError(
        fmt::format("--nnodes {}:{}: MIN must be >= 1 and <= MAX", o_.min_nodes, o_.max_nodes));
  }
}

RdzvActions RoundKeeper::connected(PeerId peer, RdzvTime now) {
  Peer p;
  p.last_seen = now;
  peers_[peer] = p;
  return {};
}

RdzvActions RoundKeeper::received(PeerId id, const rdzv::Message& message, RdzvTime now) {
  RdzvActions out;
  const auto it = peers_.find(id);
  if (it == peers_.end()) {
    return out;
  }
  Peer& p = it->second;
  p.last_seen = now;
  const bool welcomed = p.state != State::kConnected;
  std::visit(
      Overloaded{
          [&](const rdzv::Hello& m) {
            if (welcomed) {
              drop(id, "sent a second hello", out);
            } else if (m.run_id != o_.run_id) {
              out.send.push_back(
                  {id, rdzv::Refused{fmt::format("this endpoint serves rendezvous id '{}', not "
                                                 "'{}'; give every node the same --rdzv-id",
                                                 o_.run_id, m.run_id)}});
              out.close.push_back(id);
              peers_.erase(id);
            } else {
              p.state = State::kIdle;
              out.send.push_back({id, rdzv::Welcome{o_.run_id}});
            }
          },
          [&](const rdzv::Join& m) {
            if (!welcomed) {
              drop(id, "joined without a hello", out);
            } else {
              join(id, p, m, now, out);
            }
          },
          [&](const rdzv::Failed& m) { failed(p, m, out); }, [&](const rdzv::Done&) { done(p); },
          [&](const rdzv::PortReply& m) { port_reply(id, m, out); }, [&](const rdzv::Heartbeat&) {},
          [&](const auto& m) {
            drop(id, fmt::format("sent '{}', which only the server sends", rdzv::op_name(m)), out);
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

void RoundKeeper::join(PeerId id, Peer& p, const rdzv::Join& m, RdzvTime now, RdzvActions& out) {
  if (aborted_) {
    out.send.push_back({id, rdzv::Abort{abort_reason_}});
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
  if (running_ && count(State::kMember) + count(State::kDone) < o_.max_nodes) {
    end_round(fmt::format("node {} joined", p.host), /*failure=*/false, out);
  }
  tell_waiting(out);
}

void RoundKeeper::failed(Peer& p, const rdzv::Failed& m, RdzvActions& out) {
  if (p.state != State::kMember) {
    return;
  }
  ++failures_;
  const std::string why = fmt::format("{}: {}", who(p), m.reason);
  if (failures_ > o_.max_restarts) {
    abort_all(
        fmt::format("{}; {} failure(s) exceed --max-restarts {}", why, failures_, o_.max_restarts),
        out);
  } else {
    end_round(why, /*failure=*/true, out);
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

void RoundKeeper::port_reply(PeerId id, const rdzv::PortReply& m, RdzvActions& out) {
  if (chosen_.empty() || chosen_.front() != id || m.round != round_) {
    return;  // a stale answer (the closing was cancelled)
  }
  if (m.port < 1 || m.port > 65535) {
    drop(id, fmt::format("answered the port request with port {}", m.port), out);
    return;
  }
  int world = 0;
  for (PeerId c : chosen_) {
    world += peers_.at(c).nproc;
  }
  const std::string master = peers_.at(chosen_.front()).host;
  int first = 0;
  for (size_t r = 0; r < chosen_.size(); ++r) {
    Peer& p = peers_.at(chosen_[r]);
    p.state = State::kMember;
    p.node_rank = static_cast<int>(r);
    out.send.push_back(
        {chosen_[r], rdzv::Round{round_, static_cast<int>(r), static_cast<int>(chosen_.size()),
                                 world, first, master, m.port}});
    first += p.nproc;
  }
  logger().info("rendezvous '{}': round {} closed with {} node(s), world size {}, master {}:{}",
                o_.run_id, round_, chosen_.size(), world, master, m.port);
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
      out.send.push_back({id, rdzv::Restart{reason}});
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
      out.send.push_back({id, rdzv::Abort{reason}});
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
  const bool full = n >= o_.max_nodes;
  const bool last_call = n >= o_.min_nodes && now - last_join_ >= o_.last_call;
  if (!full && !last_call) {
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
  chosen_.resize(std::min<size_t>(chosen_.size(), static_cast<size_t>(o_.max_nodes)));
  for (PeerId c : chosen_) {
    peers_.at(c).state = State::kChosen;
  }
  port_deadline_ = now + o_.keep_alive;
  out.send.push_back({chosen_.front(), rdzv::PortRequest{round_}});
}

void RoundKeeper::tell_waiting(RdzvActions& out) {
  const int n = count(State::kWaiting) + count(State::kChosen);
  for (const auto& [id, p] : peers_) {
    if (p.state == State::kWaiting) {
      out.send.push_back({id, rdzv::Waiting{n, o_.min_nodes, o_.max_nodes}});
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

}  // namespace zeus::launch
