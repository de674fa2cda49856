#include "zeus/daemon/lease_keeper.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "zeus/common/atomic_file.h"
#include "zeus/common/logging.h"
#include "zeus/process/watch.h"

namespace zeus::daemon {

namespace {

std::string describe(const Holder& h) {
  return fmt::format("uid {} pid {}", h.uid, h.pid);
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LeaseKeeper::LeaseKeeper(GpuControl& gpus, LeaseKeeperOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  wake_fd_ = UniqueFd(
      check_posix(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd", "the lease watcher"));
  if (!options_.audit_path.empty()) {
    audit_fd_ = UniqueFd(check_posix(
        ::open(options_.audit_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644),
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
    std::lock_guard lock(mu_);
    release_ended();  // what died while no daemon watched
  }
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
  std::lock_guard lock(mu_);
  if (const auto holder = book_.conflict(actor, gpu)) {
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
  const int64_t original = read_original(gpu, setting);
  const LeaseBook before = book_;
  std::vector<Lease> ended;
  bool acquired = false;
  if (actor.admin) {
    ended = book_.end(gpu, setting);
  } else if (actor.process) {
    acquired = book_.acquire(actor, gpu, setting, original);
  }
  if (!ended.empty() || acquired) {
    write_journal();  // before the change: a crash after it still finds the lease
  }
  try {
    apply();
  } catch (...) {
    book_ = before;
    if (!ended.empty() || acquired) {
      write_journal();
    }
    throw;
  }
  wake();
  const std::string old_value =
      setting == Setting::kPowerLimit || setting == Setting::kPersistenceMode
          ? std::to_string(original)
          : "";
  audit({{"event", "change"},
         {"by", actor.name},
         {"uid", actor.uid},
         {"pid", actor.process ? actor.process->pid : 0},
         {"gpu", gpu},
         {"setting", setting_name(setting)},
         {"old", old_value},
         {"new", new_value},
         {"why", actor.admin ? "admin change (persists)" : "leased until the process ends"}});
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

void LeaseKeeper::restore(const Lease& lease, const std::string& why) {
  // One audit line per restore: the holders (one uid, one or more processes, the last to end
  // first in the list's end), the GPU, the value it had and the value it goes back to.
  nlohmann::json pids = nlohmann::json::array();
  for (const Holder& h : lease.holders) {
    pids.push_back(h.pid);
  }
  const Holder& last = lease.holders.back();
  std::string old_value;
  std::string value;
  try {
    switch (lease.setting) {
      case Setting::kPowerLimit:
        old_value = std::to_string(gpus_.power_limit_mw(lease.gpu));
        gpus_.set_power_limit_mw(lease.gpu, static_cast<uint32_t>(lease.original));
        value = std::to_string(lease.original);
        break;
      case Setting::kPersistenceMode:
        old_value = gpus_.persistence_mode(lease.gpu) ? "1" : "0";
        gpus_.set_persistence_mode(lease.gpu, lease.original != 0);
        value = std::to_string(lease.original);
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
  } catch (const std::exception& e) {
    logger().error("zeusd: cannot restore {} of GPU {}: {}", setting_name(lease.setting), lease.gpu,
                   e.what());
    audit({{"event", "restore_failed"},
           {"uid", last.uid},
           {"pid", last.pid},
           {"pids", pids},
           {"gpu", lease.gpu},
           {"setting", setting_name(lease.setting)},
           {"new", std::to_string(lease.original)},
           {"error", e.what()}});
    return;
  }
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
}

void LeaseKeeper::write_journal() {
  write_file_atomic(options_.journal_path, book_.to_json().dump() + "\n");
}

void LeaseKeeper::audit(nlohmann::json entry) {
  entry["time_ms"] = wall_ms();
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

bool LeaseKeeper::release_ended() {
  bool any = false;
  for (const Holder& h : book_.holders()) {
    if (process_alive(h.pid, h.start_ticks)) {
      continue;
    }
    any = true;
    // Restored before the journal forgets the lease: a crash in between restores it again at
    // the next start (restoring is idempotent); the other order could leave it lowered.
    const std::vector<Lease> freed = book_.release(h);
    for (const Lease& l : freed) {
      restore(l, fmt::format("its last holder ({}) ended", describe(h)));
    }
    write_journal();
  }
  return any;
}

void LeaseKeeper::watch_loop() {
  // One pidfd per holder (readable when it ends); a pid whose start time differs from the
  // journal's is another process, and the holder is gone.
  std::map<pid_t, std::unique_ptr<process::ProcessWatch>> watches;
  while (!stop_) {
    std::vector<pollfd> fds{{wake_fd_.get(), POLLIN, 0}};
    bool polling_needed = false;
    {
      std::lock_guard lock(mu_);
      release_ended();
      std::map<pid_t, std::unique_ptr<process::ProcessWatch>> next;
      for (const Holder& h : book_.holders()) {
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
    ::poll(fds.data(), fds.size(), polling_needed ? 50 : 1000);
    uint64_t drained = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_.get(), &drained, sizeof(drained));
  }
}

}  // namespace zeus::daemon
