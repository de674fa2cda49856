// Joining a data-parallel job: `zeus::dist::init()` detects who this process is, creates the
// rendezvous store and the process group, and returns the Context every other call uses.
#pragma once

#include <filesystem>
#include <memory>
#include <span>

#include "zeus/cluster/env.h"
#include "zeus/dist/backend.h"

namespace zeus::dist {

struct InitOptions {
  cluster::EnvOptions env;  // explicit values beat the launcher's variables
  BackendOptions backend;
  bool log_all_ranks = false;      // console logs from every rank, not only local masters
  std::filesystem::path log_file;  // per-rank log file, "{rank}" replaced; empty: none
  // Raise glibc's mmap/trim thresholds for the training loop (zeus/common/malloc_tuning.h);
  // skipped when GLIBC_TUNABLES is set. Off by default: bench/ddp_vs_pytorch measured no gain
  // here (-2.8% and +1.5% in two runs, within the machine's noise).
  bool tune_malloc = false;
};

// Contract: one per process, made by init(); collectives are called in the same order on every
// rank. A world of size 1 has no store and no process group: collectives return at once.
class Context {
 public:
  explicit Context(const InitOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const cluster::Env& env() const { return env_; }
  int rank() const { return env_.rank; }
  int local_rank() const { return env_.local_rank; }
  int world_size() const { return env_.world_size; }
  int local_world_size() const { return env_.local_world_size; }
  int node_rank() const { return env_.node_rank; }
  bool is_master() const { return env_.is_master(); }
  bool is_local_master() const { return env_.is_local_master(); }

  void barrier();
  // The mean over ranks of a metric (loss, accuracy), in double precision.
  double all_reduce_mean(double value);
  double all_reduce_sum(double value);
  double all_reduce_max(double value);
  // In place, in double precision: sums over ranks / root's values (small vectors: metrics,
  // zeus::DataLoader's measurements and decisions).
  void all_reduce_sum(std::span<double> values);
  void broadcast(std::span<double> values, int root);
  // Null for a single process.
  Backend* backend() { return backend_.get(); }

 private:
  cluster::Env env_;
  std::unique_ptr<Backend> backend_;
};

// Creates the process's Context (and makes it current). Throws ConfigError for a bad
// environment, StoreError/PeerFailed when the rendezvous fails.
std::shared_ptr<Context> init(const InitOptions& options = {});
// The context init() made; throws Error when init() was not called.
Context& current();
bool is_master();
bool is_local_master();
int rank();
int world_size();
// current().all_reduce_mean(value): the metric helper zeus::DataLoader's users call before
// report_metric().
double all_reduce_mean(double value);

}  // namespace zeus::dist
