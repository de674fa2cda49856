#include "zeus/daemon/lease_keeper.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "zeus/common/atomic_file.h"
#include "zeus/common/logging.h"
#include "zeus/common/units.h"
#include "zeus/device/restore_rule.h"
#include "zeus/process/watch.h"

namespace zeus::daemon {

namespace {

std::string describe(const Holder& h) {
  return h.pidfd_id != 0 ? fmt::format("uid {} (a process in another PID namespace)", h.uid)
                         : fmt::format("uid {} pid {}", h.uid, h.pid);
}

}  // namespace

LeaseKeeper::LeaseKeeper(GpuControl& gpus, LeaseKeeperOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  gpu_mu_ = std::vector<std::mutex>(static_cast<size_t>(std::max(0, gpus_.count())));
  wake_fd_ = UniqueFd(
      check_posix(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd", "the lease watcher"));
  if (!options_.audit_path.empty()) {
    audit_fd_ = UniqueFd(check_posix(
        ::open(options_.audit_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600),
        "open", options_.audit_path.string()));
  }
  if (std::filesystem::exists(options_.journal_path)) {
    const std::string text = read_file(options_.journal_path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(fmt::format(
          "lease journal {} is corrupt ({}); the GPUs it names may still be changed: check them "
          "with nvidia-smi, then move the file away to start",
          options_.journal_path.string(), e.what()));
    }
    book_ = LeaseBook::from_json(j, options_.journal_path.string());
    for (const Lease& l : book_.leases()) {
      if (l.gpu >= gpus_.count()) {
        throw ConfigError(fmt::format(
            "lease journal {} names GPU {}, but this machine has {} GPU(s); move the file away "
            "once the GPUs are checked",
            options_.journal_path.string(), l.gpu, gpus_.count()));
      }
    }
    logger().info("zeusd: lease journal {}: {} lease(s) of {} process(es)",
                  options_.journal_path.string(), book_.leases().size(), book_.holders().size());
  }
  settle();  // what ended while no daemon watched, and what an earlier daemon could not restore
  watcher_ = std::thread([this] { watch_loop(); });
}

LeaseKeeper::~LeaseKeeper() {
  stop_ = true;
  wake();
  watcher_.join();
}

void LeaseKeeper::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
}

void LeaseKeeper::check_may_change(const Actor& actor, int gpu) {
  if (const auto holder = book_.conflict(actor, gpu)) {
    for (const Lease& l : book_.pending()) {
      if (l.gpu == gpu && l.holders.back() == *holder) {
        throw LeaseConflict(fmt::format(
            "GPU {}: the {} that uid {} (pid {}, ended) changed is not restored yet (the "
            "restore failed and is retried; see zeusd's log); use another GPU, or ask an "
            "administrator",
            gpu, setting_name(l.setting), holder->uid, holder->pid));
      }
    }
    throw LeaseConflict(fmt::format(
        "GPU {} is held by uid {} (pid {}), which changed it; it is free again when that "
        "process ends. Use another GPU, or ask an administrator",
        gpu, holder->uid, holder->pid));
  }
  if (!actor.admin && options_.require_gpu_process) {
    const std::vector<pid_t> pids = gpus_.compute_pids(gpu);
    bool own = false;
    for (const pid_t pid : pids) {
      own = own || process_uid(pid) == std::optional<unsigned>(actor.uid);
    }
    if (!own) {
      throw PermissionError(fmt::format(
          "GPU {}: uid {} has no process on it, and this zeusd lets a user change only the GPUs "
          "its processes use (--require-gpu-process)",
          gpu, actor.uid));
    }
  }
}

int64_t LeaseKeeper::read_original(int gpu, Setting setting) {
  switch (setting) {
    case Setting::kPowerLimit:
      return gpus_.power_limit_mw(gpu);
    case Setting::kPersistenceMode:
      return gpus_.persistence_mode(gpu) ? 1 : 0;
    case Setting::kGpuLockedClocks:
    case Setting::kMemLockedClocks:
      return 0;  // restored by a reset
  }
  return 0;
}

void LeaseKeeper::change(const Actor& actor, int gpu, Setting setting, const std::string& new_value,
                         const std::function<void()>& apply) {
  // The GPU's lock orders its changes and restores; the book's lock is held only for the book
  // and its journal, never while `apply` runs (a command override may take up to a minute, and
  // every other GPU's clients must not wait for it).
  std::lock_guard gpu_lock(gpu_mu_.at(static_cast<size_t>(gpu)));
  int64_t original = 0;
  std::vector<Lease> before;
  std::vector<Lease> ended;
  bool acquired = false;
  if (!actor.admin && !actor.process) {
    throw PermissionError(fmt::format(
        "GPU {}: zeusd cannot tell which process asks ({}: its pid is in a PID namespace zeusd "
        "cannot see, and this kernel gives no pidfd of a socket's peer, which Linux 6.5 and "
        "later do), so it could not give the change back when that process ends; run zeusd in "
        "the host's PID namespace (Kubernetes: hostPID: true in its DaemonSet)",
        gpu, actor.name));
  }
  if (options_.authorize) {
    options_.authorize(actor, gpu);
  }
  {
    std::lock_guard lock(mu_);
    check_may_change(actor, gpu);
    original = read_original(gpu, setting);
    if (const auto lease = book_.find(gpu, setting)) {
      before.push_back(*lease);
    }
    if (actor.admin) {
      ended = book_.end(gpu, setting);
    } else {
      acquired = book_.acquire(actor, gpu, setting, original);
      const uint64_t id = actor.process->pidfd_id;
      if (acquired && id != 0 && actor.pidfd && !pidfds_.contains(id)) {
        pidfds_.emplace(id, UniqueFd(check_posix(::fcntl(actor.pidfd->get(), F_DUPFD_CLOEXEC, 0),
                                                 "fcntl(F_DUPFD_CLOEXEC)", "a peer's pidfd")));
      }
    }
    if (!ended.empty() || acquired) {
      retries_.erase({gpu, setting});  // an admin ended a pending restore, or a holder took it over
      write_journal();                 // before the change: a crash after it still finds the lease
    }
  }
  try {
    apply();
  } catch (...) {
    if (!ended.empty() || acquired) {
      std::lock_guard lock(mu_);
      book_.put_back(gpu, setting, before);
      write_journal();
    }
    throw;
  }
  wake();
  const std::string old_value =
      setting == Setting::kPowerLimit || setting == Setting::kPersistenceMode
          ? std::to_string(original)
          : "";
  nlohmann::json line = {
      {"event", "change"},
      {"by", actor.name},
      {"uid", actor.uid},
      {"pid", actor.process ? actor.process->pid : 0},
      {"gpu", gpu},
      {"setting", setting_name(setting)},
      {"old", old_value},
      {"new", new_value},
      {"why", actor.admin ? "admin change (persists)" : "leased until the process ends"}};
  if (options_.pod_of) {
    if (const auto pod = options_.pod_of(gpu)) {
      line["pod"] = pod->pod;
      line["namespace"] = pod->namespace_name;
      line["container"] = pod->container;
    }
  }
  audit(std::move(line));
  for (const Lease& l : ended) {
    for (const Holder& h : l.holders) {
      audit({{"event", "lease_ended"},
             {"uid", h.uid},
             {"pid", h.pid},
             {"gpu", gpu},
             {"setting", setting_name(setting)},
             {"why", fmt::format("{} changed it", actor.name)}});
    }
  }
}

std::vector<Lease> LeaseKeeper::leases() const {
  std::lock_guard lock(mu_);
  return book_.leases();
}

uint64_t LeaseKeeper::pending_restores() const {
  std::lock_guard lock(mu_);
  return book_.pending().size();
}

void LeaseKeeper::put_back(const Lease& lease, std::string& old_value, std::string& value) {
  switch (lease.setting) {
    case Setting::kPowerLimit: {
      old_value = std::to_string(gpus_.power_limit_mw(lease.gpu));
      gpus_.set_power_limit_mw(lease.gpu, static_cast<uint32_t>(lease.original));
      value = std::to_string(lease.original);
      const uint32_t now_mw = gpus_.power_limit_mw(lease.gpu);
      if (now_mw != lease.original) {
        throw DeviceError(
            fmt::format("GPU {} reads back a power limit of {} mW after the restore to {} mW",
                        lease.gpu, now_mw, lease.original));
      }
      break;
    }
    case Setting::kPersistenceMode:
      old_value = gpus_.persistence_mode(lease.gpu) ? "1" : "0";
      gpus_.set_persistence_mode(lease.gpu, lease.original != 0);
      value = std::to_string(lease.original);
      if (gpus_.persistence_mode(lease.gpu) != (lease.original != 0)) {
        throw DeviceError(
            fmt::format("GPU {} reads back another persistence mode after the restore to {}",
                        lease.gpu, lease.original));
      }
      break;
    case Setting::kGpuLockedClocks:
      gpus_.reset_gpu_locked_clocks(lease.gpu);
      value = "reset";
      break;
    case Setting::kMemLockedClocks:
      gpus_.reset_mem_locked_clocks(lease.gpu);
      value = "reset";
      break;
  }
}

void LeaseKeeper::attempt_restore(const Lease& lease) {
  // Under the GPU's lock, and only while the book still waits for this restore: a new holder
  // that took the lease over in between keeps its change.
  std::lock_guard gpu_lock(gpu_mu_.at(static_cast<size_t>(lease.gpu)));
  const auto key = std::make_pair(lease.gpu, lease.setting);
  std::string why;
  {
    std::lock_guard lock(mu_);
    const std::optional<Lease> now = book_.find(lease.gpu, lease.setting);
    if (!now || !now->restore_pending || now->holders != lease.holders) {
      return;
    }
    const auto it = retries_.find(key);
    why = it == retries_.end()
              ? fmt::format("its last holder ({}) ended", describe(lease.holders.back()))
              : fmt::format("retry after {} failed attempt(s)", it->second.failures);
  }
  std::string old_value;
  std::string value;
  std::string error;
  bool gone = false;
  try {
    put_back(lease, old_value, value);
  } catch (const std::exception& e) {
    error = e.what();
    gone = device::restore_target_gone(e);
  }

  // One audit line per attempt: the holders (one uid, one or more processes, the last to end
  // first in the list's end), the GPU, the value it had and the value it goes back to.
  nlohmann::json pids = nlohmann::json::array();
  for (const Holder& h : lease.holders) {
    pids.push_back(h.pid);
  }
  const Holder& last = lease.holders.back();
  std::lock_guard lock(mu_);
  if (error.empty()) {
    // The audit line before the journal drops the lease: a crash in between audits the
    // restore twice (the next start restores again, which changes nothing), never zero times.
    ++restores_;
    audit({{"event", "restore"},
           {"uid", last.uid},
           {"pid", last.pid},
           {"pids", pids},
           {"gpu", lease.gpu},
           {"setting", setting_name(lease.setting)},
           {"old", old_value},
           {"new", value},
           {"why", why}});
    book_.restored(lease.gpu, lease.setting);
    retries_.erase(key);
    write_journal();
    return;
  }
  Retry& retry = retries_[key];
  ++retry.failures;
  retry.gone = gone;
  retry.next = std::chrono::steady_clock::now() + device::restore_retry_delay(retry.failures);
  ++restore_failures_;
  const std::string next =
      gone ? "the GPU is gone: kept in the journal for the next start of zeusd"
           : fmt::format("retried in {} ms", device::restore_retry_delay(retry.failures).count());
  logger().error("zeusd: cannot restore {} of GPU {} to {} (attempt {}): {}; {}",
                 setting_name(lease.setting), lease.gpu, lease.original, retry.failures, error,
                 next);
  audit({{"event", "restore_failed"},
         {"uid", last.uid},
         {"pid", last.pid},
         {"pids", pids},
         {"gpu", lease.gpu},
         {"setting", setting_name(lease.setting)},
         {"new", std::to_string(lease.original)},
         {"attempt", retry.failures},
         {"error", error},
         {"next", next}});
}

std::vector<Lease> LeaseKeeper::due_restores() const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<Lease> due;
  for (const Lease& l : book_.pending()) {
    // No entry: just released, or pending in an earlier daemon's journal: tried now.
    const auto it = retries_.find({l.gpu, l.setting});
    if (it == retries_.end() || (!it->second.gone && it->second.next <= now)) {
      due.push_back(l);
    }
  }
  return due;
}

std::optional<std::chrono::steady_clock::time_point> LeaseKeeper::next_retry() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const Lease& l : book_.pending()) {
    const auto it = retries_.find({l.gpu, l.setting});
    if (it != retries_.end() && !it->second.gone) {
      next = next ? std::min(*next, it->second.next) : it->second.next;
    }
  }
  return next;
}

std::optional<std::chrono::steady_clock::time_point> LeaseKeeper::settle() {
  std::vector<Lease> due;
  {
    std::lock_guard lock(mu_);
    release_ended();
    due = due_restores();
  }
  for (const Lease& l : due) {
    attempt_restore(l);
  }
  std::lock_guard lock(mu_);
  return next_retry();
}

void LeaseKeeper::write_journal() {
  write_file_atomic(options_.journal_path, book_.to_json().dump() + "\n", 0600);
}

void LeaseKeeper::audit(nlohmann::json entry) {
  entry["time_ms"] = unix_time_ms();
  const std::string line = entry.dump() + "\n";
  logger().info("zeusd audit: {}", entry.dump());
  // One write(2) per line on an O_APPEND descriptor: lines never interleave. Not fsynced per
  // line: the journal is what restores depend on, and the audit must not double each change's
  // cost; a power loss may lose the last lines, a crash of the daemon loses none.
  if (audit_fd_.get() >= 0 &&
      ::write(audit_fd_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    logger().error("zeusd: cannot append to the audit log {}: {}", options_.audit_path.string(),
                   std::strerror(errno));
  }
}

void LeaseKeeper::release_ended() {
  // The journal records the freed leases as restore pending before any restore: a crash in
  // between restores them at the next start (restoring is idempotent), and a restore that fails
  // is still there to retry. settle() restores them, outside this lock.
  bool any = false;
  std::set<uint64_t> watched;  // the pidfds still needed
  for (const Holder& h : book_.holders()) {
    if (holder_alive(h)) {
      if (h.pidfd_id != 0) {
        watched.insert(h.pidfd_id);
      }
      continue;
    }
    for (const Lease& l : book_.release(h)) {
      retries_.erase({l.gpu, l.setting});
      any = true;
    }
  }
  // Pidfds of holders no longer in the book (ended, or their lease ended by an admin).
  std::erase_if(pidfds_, [&](const auto& entry) { return !watched.contains(entry.first); });
  if (any) {
    write_journal();
  }
}

bool LeaseKeeper::holder_alive(const Holder& holder) const {
  if (holder.pidfd_id != 0) {
    const auto it = pidfds_.find(holder.pidfd_id);
    return it != pidfds_.end() && process::pidfd_alive(it->second.get());
  }
  return process_alive(holder.pid, holder.start_ticks);
}

void LeaseKeeper::watch_loop() {
  // One pidfd per holder (readable when it ends); a pid whose start time differs from the
  // journal's is another process, and the holder is gone.
  std::map<pid_t, std::unique_ptr<process::ProcessWatch>> watches;
  while (!stop_) {
    std::vector<pollfd> fds{{wake_fd_.get(), POLLIN, 0}};
    bool polling_needed = false;
    const std::optional<std::chrono::steady_clock::time_point> retry_at = settle();
    {
      std::lock_guard lock(mu_);
      std::map<pid_t, std::unique_ptr<process::ProcessWatch>> next;
      for (const auto& [id, fd] : pidfds_) {
        fds.push_back({fd.get(), POLLIN, 0});
      }
      for (const Holder& h : book_.holders()) {
        if (h.pidfd_id != 0) {
          continue;  // watched through its pidfd, above
        }
        auto it = watches.find(h.pid);
        if (it != watches.end()) {
          next.emplace(h.pid, std::move(it->second));
          continue;
        }
        try {
          next.emplace(h.pid, std::make_unique<process::ProcessWatch>(h.pid));
        } catch (const Error&) {
          polling_needed = true;  // ended between the checks: the next round releases it
        }
      }
      watches = std::move(next);
    }
    for (const auto& [pid, watch] : watches) {
      if (watch->fd() >= 0) {
        fds.push_back({watch->fd(), POLLIN, 0});
      } else {
        polling_needed = true;
      }
    }
    int timeout_ms = polling_needed ? 50 : 1000;
    if (retry_at) {
      const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(
          *retry_at - std::chrono::steady_clock::now());
      timeout_ms = std::clamp(static_cast<int>(until.count()) + 1, 0, timeout_ms);
    }
    ::poll(fds.data(), fds.size(), timeout_ms);
    uint64_t drained = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_.get(), &drained, sizeof(drained));
  }
}

}  // namespace zeus::daemon
