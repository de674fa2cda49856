// Leases: who changed which GPU setting, what it was before, and what goes back when they end.
// The pure book (no clock, no files, no processes); lease_keeper.h is its shell.
//
// Note [leases]
// Every process that changes a setting through the daemon on its socket, root included, holds a
// lease on (GPU, setting) for as long as it lives (a root training pod that is OOM-killed must
// get its GPUs back too). The lease remembers the value before the first holder's change;
// several processes of one uid may hold one lease, and the value goes back when the last ends.
// Another uid may not change a GPU that has a lease of a different uid (409). An admin (a
// request with zeusd's admin token, or a gpu-control token over TCP, where there is no process
// to watch) is never leased: its change stays until changed back, and it ends any lease on that
// (GPU, setting) (the admin decided the value now). Being root is not being an admin: a root
// pod cannot end another's lease.
// A lease whose last holder ended stays, restore pending, until a restore reads back its
// original (retried, never dropped: Note [restore rule] in docs/security.md); meanwhile it still
// conflicts with other uids, and a new process of its uid that changes the setting takes it
// over with its first original.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/common/posix.h"

namespace zeus::daemon {

enum class Setting { kPowerLimit, kPersistenceMode, kGpuLockedClocks, kMemLockedClocks };

// "power_limit", "persistence_mode", "gpu_locked_clocks", "mem_locked_clocks".
std::string_view setting_name(Setting setting);
// The inverse; throws ConfigError for an unknown name.
Setting setting_from_name(std::string_view name);

// One process: its pid and the start time that tells it from a later process with that pid.
// A process in a PID namespace the daemon cannot see has no pid here (0): it is known by a
// pidfd of its connection instead (SO_PEERPIDFD), and `pidfd_id` names that pidfd (its pidfs
// inode: one per process; a serial where the kernel's pidfds share an inode). Such a holder
// cannot be found again by a later daemon: a restart counts it as ended and restores.
struct Holder {
  uid_t uid = 0;
  pid_t pid = 0;
  unsigned long long start_ticks = 0;
  uint64_t pidfd_id = 0;  // non-zero: watched through a pidfd, `pid` unknown
  bool operator==(const Holder&) const = default;
};

// Who asks for a change.
struct Actor {
  // zeusd's admin token on the socket, or a token holder over TCP: changes persist, nothing is
  // leased.
  bool admin = false;
  uid_t uid = 0;
  std::optional<Holder> process;  // on the socket: the peer (SO_PEERCRED), unless admin
  std::string name;               // for the audit: "uid 1000 pid 42", "token 'alice'"
  // The peer's pidfd where `process` has a pidfd_id (the lease keeper keeps a copy).
  std::shared_ptr<const UniqueFd> pidfd;
};

struct Lease {
  int gpu = 0;
  Setting setting = Setting::kPowerLimit;
  // The value before the first holder changed it: mW for the power limit, 0/1 for persistence
  // mode; unused for locked clocks (they go back by a reset: NVML cannot read them).
  int64_t original = 0;
  std::vector<Holder> holders;
  // Its last holder ended and the restore has not yet read back `original` (Note [restore
  // rule] in docs/zeusd.md): `holders` is that last holder, for the audit and for conflicts.
  bool restore_pending = false;
};

class LeaseBook {
 public:
  // A holder of another uid with a lease on `gpu` (any setting), or std::nullopt when `actor`
  // may change it. Admins never conflict; root is a uid like any other.
  std::optional<Holder> conflict(const Actor& actor, int gpu) const;
  // Records that `actor` (not an admin, with a process) changed (gpu, setting), whose value was
  // `original` before; a lease that exists keeps its first original. Returns whether the book
  // changed (false: that process already held that lease, as in a job's every later change).
  bool acquire(const Actor& actor, int gpu, Setting setting, int64_t original);
  // An admin changed (gpu, setting): the leases on it end without a restore. Returns them.
  std::vector<Lease> end(int gpu, Setting setting);
  // `holder` ended: it leaves every lease; the leases left without holders stay in the book,
  // restore pending, with `holder` (the last) as their one holder, and are returned (their
  // originals are what to restore). A lease leaves the book only through restored() or end().
  std::vector<Lease> release(const Holder& holder);
  // The restore of (gpu, setting) read back its original: the pending lease leaves the book.
  void restored(int gpu, Setting setting);
  // Replaces the leases on (gpu, setting) with `leases` (a change that failed puts back what
  // was before it, leaving every other lease as it is now).
  void put_back(int gpu, Setting setting, const std::vector<Lease>& leases);
  // The lease on (gpu, setting), if any (a copy).
  std::optional<Lease> find(int gpu, Setting setting) const;
  // The leases whose restore is pending (copies).
  std::vector<Lease> pending() const;
  // Every distinct holder of a lease that is not pending (the processes to watch).
  std::vector<Holder> holders() const;
  const std::vector<Lease>& leases() const { return leases_; }
  bool empty() const { return leases_.empty(); }

  nlohmann::json to_json() const;
  // Throws ConfigError naming `where` for a journal that is not one.
  static LeaseBook from_json(const nlohmann::json& j, std::string_view where);

 private:
  std::vector<Lease> leases_;
};

}  // namespace zeus::daemon
