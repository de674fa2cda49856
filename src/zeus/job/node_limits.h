// The power-limit policy of one node's GPUs: the journal they are changed through and who may
// change them. On the local master of a job that may change limits, a PowerLimitGuard journals
// to the node's journal in the launcher's journal directory (ResolvedJobOptions::journal_dir,
// the journal handshake) and, made, first restores what an earlier job left there. In
// measure-only mode no limit is ever set: a journal an earlier job left is reported, not used.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "zeus/job/job_options.h"
#include "zeus/job/node_gpus.h"

namespace zeus::device {
class PowerLimitGuard;
}  // namespace zeus::device

namespace zeus::job {

// Contract: made on every rank after NodeGpus (only the local master, owning GPUs, holds a
// guard: its construction may throw, so the caller agrees on it); used from one thread.
class NodeLimits {
 public:
  NodeLimits(const ResolvedJobOptions& options, NodeGpus& gpus);
  ~NodeLimits();
  NodeLimits(const NodeLimits&) = delete;
  NodeLimits& operator=(const NodeLimits&) = delete;

  // Every owned GPU to `limit_mw`, through the guard and its journal. Never called in
  // measure-only mode (a bug if it is); a no-op off the local master.
  void set_power_limit_mw(int64_t limit_mw);
  // Each owned GPU to the limit of the rank that trains on it (`by_rank`: one per global rank;
  // NodeGpus::owned_ranks()). Same rules as set_power_limit_mw().
  void set_power_limits_mw(std::span<const int64_t> by_rank);
  // Puts the original limits back (measure-only, or off the local master: nothing to do).
  void restore();

 private:
  bool measure_only_;
  NodeGpus& gpus_;
  std::unique_ptr<device::PowerLimitGuard> guard_;
};

}  // namespace zeus::job
