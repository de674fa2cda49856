// The etcd rendezvous's liveness ring: how the members of a round learn at once that a member's
// launcher stopped, rather than read_timeout later when etcd expires its lease.
//
// Note [etcd liveness ring]
//   1. Every launcher listens on a port of its own (--local-addr's address, a free port),
//      published in its record. It accepts connections and neither reads from them nor writes
//      to them: a connection there tells its maker only that this launcher runs, and changes
//      nothing.
//   2. In a closed round of N >= 2 nodes, node i connects to node (i + 1) mod N's port. When
//      that connection closes (the kernel closes it when the process dies, SIGKILL included;
//      even one the launcher had not accepted yet), node i ends the round: node i+1 left. A
//      machine that vanished closes nothing: its lease's expiry covers it.
//   3. A member that finished (done in the state) is not a loss: the round logic checks.
// Bounds: at most kMaxIncoming accepted connections (the oldest goes first); connecting takes at
// most 1 s.
#pragma once

#include <poll.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/posix.h"

namespace zeus::launch::etcd {

// Contract: one thread.
class LinkRing {
 public:
  static constexpr size_t kMaxIncoming = 64;

  // Listens on `host` (a free port). Throws IoError or ConfigError naming the address.
  explicit LinkRing(const std::string& host);
  int port() const { return port_; }

  // Watches `id` at host:port from now on (replacing any other); false, and lost() set, when
  // it cannot be reached.
  bool watch(const std::string& id, const std::string& host, int port);
  void unwatch();
  // The watched node, once its link closed; nullopt while it holds (or nothing is watched).
  const std::optional<std::string>& lost() const { return lost_; }

  // The descriptors to poll, and handling what they said.
  void add_to(std::vector<pollfd>& fds) const;
  void handle(const std::vector<pollfd>& fds);

 private:
  int port_ = 0;  // before listen_: listen_on() sets it
  UniqueFd listen_;
  std::deque<UniqueFd> incoming_;
  UniqueFd outgoing_;
  std::string watched_;
  std::optional<std::string> lost_;
};

}  // namespace zeus::launch::etcd
