// The c10d rendezvous's server: the launcher on the endpoint's host serves it from a thread of
// its own; every node's launcher (c10d/client.h) joins it over TCP. The decisions are the round
// keeper's (c10d/round_keeper.h); this is the socket shell around it, and the gate: a peer whose
// lines are not the protocol's, of another version, without the run's token or with another one
// is refused, logged (at most 20 lines per 10 s) and closed, and the run goes on.
//
// Bounds: at most kMaxPending connections that have not joined yet (a newcomer beyond it evicts
// the oldest, so that a flood of idle connections cannot keep a real node out), each with
// kHandshake (at most half of read_timeout) to join; at most kMaxPeers in all; lines of at most
// Line::kMaxLine bytes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "zeus/launch/rendezvous.h"

namespace zeus::launch::c10d {

class Server {
 public:
  static constexpr size_t kMaxPending = 64;
  static constexpr size_t kMaxPeers = 1024;
  static constexpr std::chrono::milliseconds kHandshake{5'000};

  // Binding fails with IoError naming the address and port (ConfigError when the address does
  // not resolve). Without a token on a non-loopback address, warns what anyone who reaches the
  // port can do, and how to close it.
  Server(const std::string& bind_addr, int port, RendezvousOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  int port() const;
  // Waits until every member of the last round reported done (or the run was aborted); false
  // when `timeout` passed first.
  bool wait_finished(std::chrono::milliseconds timeout);
  // Peers refused so far (bad lines, tokens, versions, floods), for tests.
  long refused() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::launch::c10d
