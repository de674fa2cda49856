// The lease book's shell: it journals each change before making it, watches every holder's
// process, and puts a GPU back the moment its last holder ends (see Note [leases] in leases.h).
// A restore that fails stays in the journal and is retried (Note [restore rule], docs/security.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/daemon/gpu_control.h"
#include "zeus/daemon/leases.h"
#include "zeus/daemon/pods.h"

namespace zeus::daemon {

// Another uid holds the GPU: the routes answer 409 with this message.
class LeaseConflict : public Error {
 public:
  using Error::Error;
};

struct LeaseKeeperOptions {
  // The journal (trusted input: the state directory must be writable by root only).
  std::filesystem::path journal_path;
  // The audit trail: one JSON line per change, restore and ended lease. Empty: the log only.
  std::filesystem::path audit_path;
  // Policy: a non-root uid may change a GPU only while one of its processes runs on it (NVML's
  // compute-process list). Off by default (see docs/zeusd.md).
  bool require_gpu_process = false;
  // The pod holding a GPU, named in the audit's change lines; empty: none named.
  PodOfGpu pod_of;
  // Throws PermissionError when `actor` may not change `gpu` at all (PodAuthority::check);
  // called before the book is consulted, outside its lock. Empty: every GPU.
  std::function<void(const Actor& actor, int gpu)> authorize;
};

class LeaseKeeper {
 public:
  // Reads the journal (a missing one is empty), restores what belongs to processes that ended
  // while no daemon watched, and watches the rest. Throws ConfigError for a corrupt journal
  // (naming it: the operator decides), IoError when it cannot be read.
  LeaseKeeper(GpuControl& gpus, LeaseKeeperOptions options);
  // Stops watching; the journal keeps the leases for the next daemon.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Changes (gpu, setting) for `actor`: refuses a GPU another uid holds (LeaseConflict), records
  // the lease in the journal (fsynced) before `apply` runs, when the book changes (a process's
  // later changes to a lease it holds need no write), and takes it back when `apply` throws
  // (rethrown). `new_value` is for the audit only.
  void change(const Actor& actor, int gpu, Setting setting, const std::string& new_value,
              const std::function<void()>& apply);

  // Copies of the current leases (tests, --check).
  std::vector<Lease> leases() const;
  // How many restores ran since start (tests and the bench wait on it).
  uint64_t restores() const { return restores_.load(); }
  // How many restore attempts failed since start (zeus_restore_failures_total).
  uint64_t restore_failures() const { return restore_failures_.load(); }
  // How many leases wait for a restore that has not succeeded yet.
  uint64_t pending_restores() const;

 private:
  struct Retry {
    int failures = 0;
    std::chrono::steady_clock::time_point next;
    bool gone = false;  // the GPU is lost: kept for the next start, not retried in this one
  };
  // Throws LeaseConflict or PermissionError when `actor` may not change `gpu` (under mu_).
  void check_may_change(const Actor& actor, int gpu);
  int64_t read_original(int gpu, Setting setting);
  // Sets the lease's original back and reads it back; throws when it cannot (no lock held).
  void put_back(const Lease& lease, std::string& old_value, std::string& value);
  // One restore attempt under the GPU's lock; the book and the retry schedule are updated, the
  // attempt logged and audited (a failure counted and scheduled, never dropped).
  void attempt_restore(const Lease& lease);
  // Under mu_: the pending restores due now, and when the next later one is.
  std::vector<Lease> due_restores() const;
  std::optional<std::chrono::steady_clock::time_point> next_retry() const;
  // Releases the ended holders and attempts every due restore; returns when the next retry is.
  std::optional<std::chrono::steady_clock::time_point> settle();
  void write_journal();
  void audit(nlohmann::json entry);
  void watch_loop();
  // Under mu_: every holder that is gone leaves the book; its leases become pending.
  void release_ended();
  // Under mu_: whether `holder` still runs (its pid and start time, or its pidfd).
  bool holder_alive(const Holder& holder) const;
  void wake();

  GpuControl& gpus_;
  LeaseKeeperOptions options_;
  // Lock order: a GPU's, then mu_. The GPU's orders its changes and restores (held while NVML
  // or an override command runs); mu_ guards the book, the journal and the retries only.
  std::vector<std::mutex> gpu_mu_;
  mutable std::mutex mu_;
  LeaseBook book_;
  std::map<std::pair<int, Setting>, Retry> retries_;  // under mu_
  // The pidfds of holders this daemon cannot see by pid (Holder::pidfd_id), under mu_; a holder
  // with an id missing here (an earlier daemon's) has ended as far as this one can tell.
  std::map<uint64_t, UniqueFd> pidfds_;
  std::atomic<uint64_t> restores_{0};
  std::atomic<uint64_t> restore_failures_{0};
  std::atomic<bool> stop_{false};
  UniqueFd wake_fd_;   // an eventfd: the book changed, or stop
  UniqueFd audit_fd_;  // the audit log, O_APPEND; -1 without one
  std::thread watcher_;
};

}  // namespace zeus::daemon
