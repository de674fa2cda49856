// Per-peer caps for zeus-cpp's servers (Note [peer policy] in docs/security.md): who is on the
// other end (the uid on a Unix socket, the address on TCP) may hold at most so many
// connections and so many event streams, below the server's totals, so that one user or one
// host cannot take them all and lock the others out.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace zeus::http {

// Counts what each peer holds. Thread-safe.
class PeerLimits {
 public:
  explicit PeerLimits(unsigned max_per_peer) : max_per_peer_(max_per_peer) {}

  // Takes one slot for `peer`; false (and nothing taken) when it already holds max_per_peer.
  bool acquire(const std::string& peer);
  // Gives back a slot acquire() took.
  void release(const std::string& peer);
  // What `peer` holds now.
  unsigned held(const std::string& peer) const;
  unsigned max_per_peer() const { return max_per_peer_; }

 private:
  unsigned max_per_peer_;
  mutable std::mutex mu_;
  std::map<std::string, unsigned> held_;
};

// The per-peer cap when the options leave it 0: a quarter of the total, at least 1.
unsigned default_per_peer(unsigned total);

// "uid 1000" for a Unix-socket peer, the address ("10.0.0.7") for a TCP one: the key the caps
// count by, and what a refusal names. Empty when the socket says nothing (counted as one peer).
std::string peer_of_socket(int fd);

}  // namespace zeus::http
