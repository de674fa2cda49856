// The elastic rendezvous of `zeus run --nnodes MIN:MAX --rdzv-backend c10d`: torchrun's
// dynamic membership, served by the launcher on the endpoint's host and joined by every node's
// launcher over TCP (newline-delimited JSON). A round closes when MAX nodes joined, or when at
// least MIN joined and `last_call` passed without a newcomer; it numbers the nodes and gives
// the workers' world. While a round runs, a node that leaves (its connection closes, or no
// heartbeat for `keep_alive`), a node's failed workers, or a newcomer while the round has room,
// ends the round: every member is told to restart and joins the next one. Failures count
// against `max_restarts`; membership changes do not. No libtorch: the workers rendezvous among
// themselves afterwards on the round's master address and port, as under torchrun.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zeus::launch {

struct RendezvousOptions {
  std::string run_id = "none";  // --rdzv-id: a node of another run is refused
  int min_nodes = 1;
  int max_nodes = 1;
  // torchrun's rdzv-conf last_call_timeout (30 s) and join_timeout (600 s).
  std::chrono::milliseconds last_call{30'000};
  std::chrono::milliseconds join_timeout{600'000};
  // A node sends a heartbeat every `heartbeat`; the server drops one silent for `keep_alive`.
  std::chrono::milliseconds heartbeat{1'000};
  std::chrono::milliseconds keep_alive{5'000};
  int max_restarts = 0;  // failed rounds tolerated before the run is aborted
};

// One node's place in a closed round.
struct RendezvousRound {
  int round = 0;  // 0 for the first: the workers' TORCHELASTIC_RESTART_COUNT
  int node_rank = 0;
  int nnodes = 1;
  int world_size = 1;       // the sum of the members' nproc
  int first_rank = 0;       // this node's first global rank
  std::string master_addr;  // node 0's host, where rank 0 serves the workers' store
  int master_port = 0;      // a port node 0 found free
};

// What ended a running round, as the server told this node.
struct RendezvousNotice {
  enum class Kind { kRestart, kAbort } kind = Kind::kRestart;
  std::string reason;  // e.g. "node 1 (host b) left"
};

// Contract: serves until destroyed, from its own thread. Binding fails with IoError naming the
// address and port (ConfigError when the address does not resolve).
class RendezvousServer {
 public:
  RendezvousServer(const std::string& bind_addr, int port, RendezvousOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;
  int port() const;
  // Waits until every member of the last round reported done (or the run was aborted); false
  // when `timeout` passed first.
  bool wait_finished(std::chrono::milliseconds timeout);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Contract: one per node launcher, used from one thread (its heartbeats run on their own).
class RendezvousClient {
 public:
  struct Node {
    std::string host;  // how the other nodes reach this one (its workers' master address)
    int nproc = 1;
  };
  RendezvousClient(std::string endpoint_host, int endpoint_port, RendezvousOptions options,
                   Node node);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // Joins the next round and waits until it closes. Throws TimeoutError after join_timeout
  // naming how many nodes joined against MIN; DistError when the run was aborted, the endpoint
  // refused this node (another run id) or went away.
  RendezvousRound join();
  // After join(): waits up to `timeout` for the round to end; nullopt when it still runs.
  std::optional<RendezvousNotice> wait_notice(std::chrono::milliseconds timeout);
  // This node's workers failed (counts against max_restarts) / all exited 0.
  void report_failure(const std::string& why);
  void report_done();
  // The connection to the endpoint (readable: a notice may have come), -1 before join().
  int fd() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::launch
