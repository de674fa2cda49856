// The etcd rendezvous's liveness ring: how the members of a round learn at once that a member's
// launcher stopped, rather than read_timeout later when etcd expires its lease.
//
// Note [etcd liveness ring]
//   1. Every launcher listens on a port of its own (--local-addr's address, a free port),
//      published in its record.
//   2. In a closed round of N >= 2 nodes, node i connects to node (i + 1) mod N's port and says
//      "zeus-rdzv-link <i's id> <mac>\n", the mac an HMAC of both ids with the run's token ("-"
//      without one). Nothing else is ever written either way.
//   3. When that connection closes (the kernel closes it when the process dies, SIGKILL
//      included), node i ends the round: node i+1 left. A machine that vanished closes nothing:
//      its lease's expiry covers it. A member that finished (done in the state) is no loss: the
//      round logic checks.
//   4. The listener keeps the connections whose greeting holds (kMaxLinks at most, the oldest
//      closed first: those of earlier rounds), and closes the others after kGreeting. At most
//      kMaxPending connections wait for their greeting; a newer one closes the oldest. So a
//      flood of connections from a party without the token never closes a member's link.
#pragma once

#include <poll.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/posix.h"

namespace zeus::launch::etcd {

// Contract: one thread.
class LinkRing {
 public:
  static constexpr size_t kMaxPending = 64;
  static constexpr size_t kMaxLinks = 16;
  static constexpr std::chrono::milliseconds kGreeting{1'000};

  // Listens on `host` (a free port) for node `self_id` of a run with `token`. Throws IoError or
  // ConfigError naming the address.
  LinkRing(const std::string& host, std::string self_id, std::optional<std::string> token);
  int port() const { return port_; }

  // Watches node `id` at host:port from now on (replacing any other); false, and lost() set,
  // when it cannot be reached.
  bool watch(const std::string& id, const std::string& host, int port);
  void unwatch();
  // The watched node, once its link closed; nullopt while it holds (or nothing is watched).
  const std::optional<std::string>& lost() const { return lost_; }

  // The descriptors to poll, and handling what they said.
  void add_to(std::vector<pollfd>& fds) const;
  void handle(const std::vector<pollfd>& fds);

 private:
  struct Incoming {
    UniqueFd fd;
    std::chrono::steady_clock::time_point accepted;
    std::string greeting;  // read so far
    bool linked = false;   // its greeting held
  };
  std::string greeting_of(const std::string& watcher, const std::string& watched) const;
  // Reads what came; false when the connection is to be closed.
  bool read(Incoming& in);
  void accept();
  void expire();

  std::string self_;
  std::optional<std::string> token_;
  int port_ = 0;  // before listen_: listen_on() sets it
  UniqueFd listen_;
  std::deque<Incoming> incoming_;
  UniqueFd outgoing_;
  std::string watched_;
  std::optional<std::string> lost_;
};

}  // namespace zeus::launch::etcd
