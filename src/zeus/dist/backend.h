// The one place zeus-cpp calls c10d (TCPStore, ProcessGroupGloo, collectives), so that
// supporting libtorch 2.x (where ProcessGroup holds Backends) or NCCL touches this file alone.
// Tensors are forward-declared: including this header costs no libtorch parse time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "zeus/cluster/env.h"

namespace at {
class Tensor;
}  // namespace at

namespace zeus::dist {

struct BackendOptions {
  // How long non-master ranks retry connecting to the master's store, and how long the store
  // waits for all ranks to join.
  std::chrono::milliseconds store_timeout = std::chrono::seconds(300);
  // How long a collective may wait for its peers (PyTorch's default: 30 min).
  std::chrono::milliseconds collective_timeout = std::chrono::minutes(30);
};

// A rendezvous store plus a Gloo process group for one rank of `env`.
//
// Contract: construction is collective (every rank constructs with the same world); then
// collectives are called in the same order on every rank, from one thread. Failures (a peer
// that died, a timeout) throw DistError subclasses naming this rank, the collective and the
// cause; they never hang past the timeout.
class Backend {
 public:
  Backend(const cluster::Env& env, const BackendOptions& options);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  void barrier();
  // In place: every tensor becomes root's.
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  // In place: every tensor becomes the sum over ranks.
  void all_reduce_sum(std::vector<at::Tensor>& tensors);

  // An all-reduce running in the background; wait() finishes it (and throws its error).
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  // Starts all_reduce_sum without waiting. The tensors must stay alive until wait().
  std::unique_ptr<Pending> start_all_reduce_sum(std::vector<at::Tensor>& tensors);

  struct Impl;  // opaque: the c10d objects

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::dist
