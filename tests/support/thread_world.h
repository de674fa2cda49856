// Ranks as threads: a job::Collectives whose ranks are threads of one process, so multi-rank
// EnergyJob behaviour (aggregation over ranks and nodes, one decision for all, agreed errors)
// is tested in milliseconds, beside the multi-process tests over Gloo.
//
// Like a real process group, a collective returns on a rank once every rank has entered it, and
// every rank must call the same collectives in the same order with the same lengths: a mismatch
// throws DistError on every rank (a real group would hang or corrupt). A rank that fails
// outside a collective would leave the others waiting, so run_ranks() aborts the world then:
// the others' collectives throw DistError, as they would with a peer that died.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "zeus/job/collectives.h"

namespace zeus::test {

class ThreadWorld {
 public:
  // world_size ranks, local_world_size per node (ranks 0..L-1 on node 0, and so on).
  explicit ThreadWorld(int world_size, int local_world_size);
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;
  ~ThreadWorld();

  int world_size() const { return world_size_; }
  job::Collectives& rank(int r);
  // Wakes every waiting rank with a DistError naming `failed_rank`; later collectives throw too.
  void abort(int failed_rank, const std::string& why);
  // How many collectives completed (each counted once).
  int completed() const;

 private:
  class Rank;
  enum class Op { kSum, kBroadcast };
  void collective(int rank, Op op, std::span<double> values, int root);

  int world_size_;
  int local_world_size_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int generation_ = 0;
  std::vector<std::vector<double>> in_;
  std::vector<Op> ops_;
  std::vector<int> roots_;
  std::vector<double> out_;
  std::string error_;  // set: every collective throws it
};

// Runs body(rank, collectives) on one thread per rank and joins them. The first exception of
// each rank is returned (nullptr where none); a rank that throws aborts the world.
std::vector<std::exception_ptr> run_ranks(
    ThreadWorld& world, const std::function<void(int rank, job::Collectives&)>& body);

}  // namespace zeus::test
