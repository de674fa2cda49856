// The c10d rendezvous server's decisions as a pure state machine: which nodes form a round, when
// it closes, who is told what when a node joins, fails, finishes, leaves or goes silent, by the
// rules every backend keeps (round_rules.h). No sockets and no clock of its own: the shell
// (c10d/server.cpp) feeds it connections, decoded messages and the time, and carries out what it
// returns. The protocol is Note [rendezvous protocol] in c10d/protocol.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "zeus/launch/c10d/protocol.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch::c10d {

using RdzvTime = std::chrono::steady_clock::time_point;
using PeerId = uint64_t;

// What the shell must do: send these messages (in order), then close these connections.
struct RdzvActions {
  struct Send {
    PeerId to;
    Message message;
  };
  std::vector<Send> send;
  std::vector<PeerId> close;
};

// Contract: one thread; every call passes the current time, never earlier than the last one.
// Peer ids are the shell's, unique for the keeper's life. A peer the keeper asks to close is
// not reported back as disconnected.
class RoundKeeper {
 public:
  // Throws ConfigError when MIN < 1 or MAX < MIN.
  RoundKeeper(RendezvousOptions options, RdzvTime now);

  RdzvActions connected(PeerId peer, RdzvTime now);
  RdzvActions received(PeerId peer, const Message& message, RdzvTime now);
  // The peer sent something that is not a message of this protocol: it is closed.
  RdzvActions malformed(PeerId peer, const std::string& why, RdzvTime now);
  RdzvActions disconnected(PeerId peer, RdzvTime now);
  // Keep-alive, the last call and the port request's deadline.
  RdzvActions tick(RdzvTime now);

  // Every member of the last round reported done, or the run was aborted.
  bool over() const { return finished_ || aborted_; }
  int round() const { return round_; }

 private:
  enum class State { kConnected, kIdle, kWaiting, kChosen, kMember, kDone };
  struct Peer {
    State state = State::kConnected;
    std::string host;
    int nproc = 0;
    int node_rank = -1;
    RdzvTime last_seen;
    RdzvTime joined_at;
  };

  void join(PeerId id, Peer& p, const Join& m, RdzvTime now, RdzvActions& out);
  void failed(Peer& p, const Failed& m, RdzvActions& out);
  void done(Peer& p);
  void port_reply(PeerId id, const PortReply& m, RdzvActions& out);
  void drop(PeerId id, const std::string& why, RdzvActions& out);
  void end_round(const std::string& reason, bool failure, RdzvActions& out);
  void abort_all(const std::string& reason, RdzvActions& out);
  void cancel_closing(RdzvActions& out);
  void maybe_close(RdzvTime now, RdzvActions& out);
  void tell_waiting(RdzvActions& out);
  int count(State s) const;
  std::string who(const Peer& p) const;

  RendezvousOptions o_;
  std::map<PeerId, Peer> peers_;
  RdzvTime last_join_;
  int round_ = 0;  // the next round to close
  int failures_ = 0;
  bool running_ = false;
  bool aborted_ = false;
  bool finished_ = false;
  std::string abort_reason_;
  // While a round closes: its members in node-rank order, and when node 0 must have answered.
  std::vector<PeerId> chosen_;
  RdzvTime port_deadline_;
};

}  // namespace zeus::launch::c10d
