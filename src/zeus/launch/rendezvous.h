// The elastic rendezvous of `zeus run --nnodes MIN:MAX`: torchrun's dynamic membership, behind
// one interface with two backends.
//   - c10d/ (`--rdzv-backend c10d`): served by the launcher on the endpoint's host, joined by
//     every node's launcher over TCP (newline-delimited JSON).
//   - etcd/ (`--rdzv-backend etcd`): no launcher is special; the run's state lives in etcd (v3,
//     its JSON gateway), changed by compare-and-swap transactions and seen through a watch.
// Both keep the same rules (round_rules.h): a round closes when MAX nodes joined, or when at
// least MIN joined and `last_call` passed without a newcomer; it numbers the nodes and gives the
// workers' world, whose master is node 0. While a round runs, a node that leaves, a node's failed
// workers, or a newcomer while the round has room ends the round: every member restarts its
// workers and joins the next one. Failures count against `max_restarts`; membership changes do
// not. No libtorch: the workers rendezvous among themselves afterwards on the round's master
// address and port, as under torchrun.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zeus::launch {

// --rdzv-backend etcd: where etcd is and how to reach it (torchrun's etcd keys where they apply).
struct EtcdOptions {
  std::vector<std::string> endpoints;  // HOST:PORT, in the order they are tried
  std::string protocol = "http";       // http or https
  std::string cacert;                  // PEM files for etcd's TLS (empty: none)
  std::string cert;
  std::string key;
  std::string user;  // etcd's own authentication (empty: none); the password from a file
  std::optional<std::string> password;
};

struct RendezvousOptions {
  std::string run_id = "none";  // --rdzv-id: a node of another run is refused
  int min_nodes = 1;
  int max_nodes = 1;
  // torchrun's rdzv-conf last_call_timeout (30 s) and join_timeout (600 s).
  std::chrono::milliseconds last_call{30'000};
  std::chrono::milliseconds join_timeout{600'000};
  // A node beats every `heartbeat`; one silent for `keep_alive` (read_timeout) counts as gone.
  std::chrono::milliseconds heartbeat{1'000};
  std::chrono::milliseconds keep_alive{5'000};
  int max_restarts = 0;  // failed rounds tolerated before the run is aborted
  // --rdzv-conf token_file: the shared secret that signs every message and record (Note
  // [rendezvous authentication] in rendezvous_auth.h); unset: nothing is signed.
  std::optional<std::string> token;
  EtcdOptions etcd;
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

// What ended a running round, as the rendezvous told this node.
struct RendezvousNotice {
  enum class Kind { kRestart, kAbort } kind = Kind::kRestart;
  std::string reason;  // e.g. "node 1 (host b) left"
};

// This node, as the others see it.
struct RendezvousNode {
  std::string host;  // how the other nodes reach this one (its workers' master address)
  int nproc = 1;
};

// A node's launcher's side of the rendezvous, whichever backend serves it. Contract: used from
// the launcher's thread, in this order: join(), then wait_notice() (and fd() in a poll) while
// the workers run, then report_failure() or report_done(), then join() again after a notice
// of a restart. A backend's own threads (heartbeats, watches) never call back into the caller.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round and waits until it closes. Throws TimeoutError after join_timeout
  // naming how many nodes joined against MIN; DistError when the run was aborted, the
  // rendezvous refused this node (another run id, another token, another version) or went away.
  virtual RendezvousRound join() = 0;
  // After join(): waits up to `timeout` for the round to end; nullopt when it still runs. A
  // rendezvous this node lost (the endpoint, or etcd, gone for longer than the timeouts) is an
  // abort naming it.
  virtual std::optional<RendezvousNotice> wait_notice(std::chrono::milliseconds timeout) = 0;
  // This node's workers failed (counts against max_restarts) / all exited 0.
  virtual void report_failure(const std::string& why) = 0;
  virtual void report_done() = 0;
  // After report_done(): waits until the rest of the run no longer needs this node (c10d's
  // serving node keeps the rendezvous up until every member is done); false after `timeout`.
  virtual bool wait_finished(std::chrono::milliseconds timeout) = 0;
  // Readable when a notice may have come (for the attempt's poll); -1 before join().
  virtual int fd() const = 0;
};

}  // namespace zeus::launch
