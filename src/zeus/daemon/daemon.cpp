#include "zeus/daemon/daemon.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "zeus/common/directories.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/parse.h"
#include "zeus/daemon/admin_token.h"
#include "zeus/daemon/command_overrides.h"
#include "zeus/daemon/gpu_set_control.h"
#include "zeus/daemon/pod_records.h"
#include "zeus/device/discovery.h"

namespace zeus::daemon {

namespace {

// A machine without GPUs (no driver, no backend's library): zeusd still serves CPUs and the
// clock.
class NoGpus final : public GpuControl {
 public:
  int count() const override { return 0; }
  GpuIdentity identity(int) const override { throw none(); }
  uint64_t energy_mj(int) override { throw none(); }
  uint32_t power_mw(int) override { throw none(); }
  uint32_t power_limit_mw(int) override { throw none(); }
  PowerLimitRange power_limit_constraints_mw(int) override { throw none(); }
  bool persistence_mode(int) override { throw none(); }
  std::vector<pid_t> compute_pids(int) override { return {}; }
  void set_power_limit_mw(int, uint32_t) override { throw none(); }
  void set_persistence_mode(int, bool) override { throw none(); }
  void set_gpu_locked_clocks(int, uint32_t, uint32_t) override { throw none(); }
  void reset_gpu_locked_clocks(int) override { throw none(); }
  void set_mem_locked_clocks(int, uint32_t, uint32_t) override { throw none(); }
  void reset_mem_locked_clocks(int) override { throw none(); }

 private:
  static ConfigError none() { return ConfigError("this machine has no GPUs"); }
};

std::filesystem::path rapl_root(const DaemonOptions& o) {
  if (!o.rapl_root.empty()) {
    return o.rapl_root;
  }
  if (std::filesystem::exists("/zeus_sys/class/powercap")) {
    return "/zeus_sys/class/powercap";
  }
  return {};  // RAPL: $ZEUS_RAPL_ROOT, else /sys/class/powercap
}

// The override file's operations; none when there is no file, or when gpu-control is off
// (upstream ignores the file then, with a warning).
CommandOverrides overrides_of(const DaemonOptions& o) {
  if (o.gpu_command_overrides.empty()) {
    return {};
  }
  if (!o.api.gpu_control) {
    logger().warn("zeusd: --gpu-command-overrides {} ignored: gpu-control is not enabled",
                  o.gpu_command_overrides.string());
    return {};
  }
  return load_command_overrides(o.gpu_command_overrides);
}

// Every GPU of the machine from --gpu-backend, or nullptr (saying why) when it cannot open or
// lists none. The API's control and the metrics listener are views of this one set.
std::unique_ptr<device::GpuSet> open_machine_gpus(const DaemonOptions& o, std::string* why_none) {
  try {
    // Machine-wide sets list the GPUs in machine order: a GPU's position is its machine index,
    // the GPU id on the wire (upstream zeusd's: NVML's order, AMD SMI's handle order).
    auto set = device::open_gpu_set(o.gpu_backend,
                                    {.respect_visible_devices = false, .zeusd_from_env = false});
    if (set->count() > 0) {
      return set;
    }
    *why_none = fmt::format("--gpu-backend {} lists no GPUs", o.gpu_backend);
  } catch (const Error& e) {
    *why_none = e.what();
  }
  return nullptr;
}

// What the API reads and changes: `set` (which must outlive it), through the override file's
// commands where it has them; NoGpus without a set.
std::unique_ptr<GpuControl> control_of(device::GpuSet* set, const CommandOverrides& overrides) {
  if (set == nullptr) {
    return std::make_unique<NoGpus>();
  }
  std::unique_ptr<GpuControl> gpus = std::make_unique<GpuSetControl>(*set);
  if (!overrides.empty()) {
    gpus = with_command_overrides(std::move(gpus), overrides);
  }
  return gpus;
}

std::unique_ptr<device::CpuSet> open_cpus(const DaemonOptions& o, std::string* why_none) {
  try {
    return device::open_cpu_set({.rapl_root = rapl_root(o)});
  } catch (const Error& e) {
    *why_none = e.what();
    return nullptr;
  }
}

// The state directory: created 0700, and never one another user can write (its journal says
// which settings to restore, so it is trusted input).
void check_state_dir(const std::filesystem::path& dir) {
  // Every level made here is 0700: the audit log and the journals say which uid changed what,
  // for root's eyes.
  make_directory(dir, "state directory", 0700);
  struct stat st {};
  check_posix(::stat(dir.c_str(), &st), "stat", dir.string());
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw ConfigError(fmt::format(
        "state directory {} is owned by uid {} with mode {:o}: it must belong to the daemon's "
        "user (uid {}) and be writable by it alone (chown, then chmod 700), because its lease "
        "journal decides what is restored",
        dir.string(), st.st_uid, st.st_mode & 07777, ::geteuid()));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    logger().warn(
        "zeusd: state directory {} has mode {:o}: other users can read its audit log and "
        "journals (which uid changed which GPU); chmod 700 it",
        dir.string(), st.st_mode & 07777);
  }
}

// Upstream's rule: gpu-control and cpu-read need root, except gpu-control with a non-empty
// override file (its commands may be what holds the privilege, sudo rules say).
void check_privileges(const DaemonOptions& o, const CommandOverrides& overrides) {
  if (!o.require_root || ::geteuid() == 0) {
    return;
  }
  if ((o.api.gpu_control && overrides.empty()) || o.api.cpu_read) {
    throw ConfigError(fmt::format(
        "zeusd runs as uid {}, but the API groups gpu-control and cpu-read need root (setting "
        "GPU limits, reading RAPL); run it as root (see examples/systemd/), or serve only "
        "--enable gpu-read",
        ::geteuid()));
  }
}

}  // namespace

kube::MigParent mig_parent_of(const device::GpuSet* set) {
  if (set == nullptr) {
    return {};
  }
  return [set](std::string_view instance) { return set->mig_parent_uuid(instance); };
}

GpuOfDevice gpu_of_device(const device::GpuSet* set) {
  std::map<std::string, int> by_key;  // a GPU's UUID and PCI address, lower case
  for (int g = 0; set != nullptr && g < set->count(); ++g) {
    for (const std::string& id : {set->uuid(g), set->pci_address(g)}) {
      if (!id.empty()) {
        by_key[to_lower(id)] = g;
      }
    }
  }
  return [by_key, mig_parent = mig_parent_of(set)](const std::string& id) -> std::optional<int> {
    const auto key = kube::gpu_key_of_device(id, mig_parent);
    const auto it = key ? by_key.find(*key) : by_key.end();
    return it == by_key.end() ? std::nullopt : std::optional(it->second);
  };
}

std::string check_gpu_backend(const std::string& name) {
  std::vector<std::string> machine{"auto"};
  for (const device::GpuBackend& b : device::gpu_backends()) {
    if (b.machine) {
      machine.push_back(b.name);
    }
  }
  if (std::find(machine.begin(), machine.end(), name) == machine.end()) {
    throw ConfigError(
        fmt::format("--gpu-backend {}: this zeusd drives {}", name, fmt::join(machine, ", ")));
  }
  return name;
}

Inventory inspect(const DaemonOptions& options) {
  Inventory inv;
  std::string why;
  CommandOverrides overrides;
  try {
    overrides = overrides_of(options);
    for (const auto& [op, o] : overrides) {
      inv.lines.push_back(fmt::format("override: {} runs {} command(s)", op, o.commands.size()));
    }
  } catch (const ConfigError& e) {
    inv.ok = false;
    inv.lines.push_back(fmt::format("will not start: {}", e.what()));
  }
  const auto set = open_machine_gpus(options, &why);
  const auto gpus = control_of(set.get(), overrides);
  if (gpus->count() == 0) {
    inv.lines.push_back(fmt::format("GPUs: none ({})", why));
  }
  for (int i = 0; i < gpus->count(); ++i) {
    const GpuIdentity id = gpus->identity(i);
    std::string limit;
    try {
      const PowerLimitRange r = gpus->power_limit_constraints_mw(i);
      limit = fmt::format("limit {} mW in [{}, {}]", gpus->power_limit_mw(i), r.min_mw, r.max_mw);
    } catch (const Error& e) {
      limit = e.what();
    }
    inv.lines.push_back(fmt::format("GPU {}: {} at {}, energy counter {}, {}", i, id.name,
                                    id.pci_address.empty() ? "?" : id.pci_address,
                                    id.energy_available ? "yes" : "no", limit));
  }
  std::string why_cpu;
  auto cpus = open_cpus(options, &why_cpu);
  if (!cpus) {
    inv.lines.push_back(fmt::format("RAPL: none ({})", why_cpu));
  }
  for (int i = 0; cpus && i < cpus->count(); ++i) {
    inv.lines.push_back(
        fmt::format("CPU {}: {}, DRAM {}", i, cpus->name(i), cpus->has_dram(i) ? "yes" : "no"));
  }
  inv.lines.push_back(fmt::format("privileges: euid {}{}", ::geteuid(),
                                  ::geteuid() == 0 ? " (root: may set GPU limits)" : ""));
  try {
    check_privileges(options, overrides);
  } catch (const ConfigError& e) {
    inv.ok = false;
    inv.lines.push_back(fmt::format("will not start: {}", e.what()));
  }
  inv.lines.push_back(fmt::format("state directory: {}", options.state_dir.string()));
  return inv;
}

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {
  const CommandOverrides overrides = overrides_of(options_);
  check_privileges(options_, overrides);
  if (options_.server.mode == http::ServerOptions::Mode::kTcp && options_.api.gpu_control &&
      !options_.api.signing_key) {
    throw ConfigError(
        "over TCP, gpu-control needs tokens: give --signing-key-path (and issue tokens with "
        "`zeusd token issue`), or leave gpu-control out of --enable");
  }
  check_state_dir(options_.state_dir);
  const std::filesystem::path admin_token = options_.admin_token_file.empty()
                                                ? options_.state_dir / "admin.token"
                                                : options_.admin_token_file;
  options_.api.admin_token = load_or_create_admin_token(admin_token);
  options_.api.admin_token_path = admin_token.string();
  std::string why;
  gpu_set_ = open_machine_gpus(options_, &why);
  gpus_ = control_of(gpu_set_.get(), overrides);
  if (gpus_->count() == 0) {
    logger().warn("zeusd: no GPUs ({}); serving CPUs and the clock only", why);
  } else {
    logger().info("zeusd: {} GPU(s)", gpus_->count());
  }
  std::string why_cpu;
  cpus_ = open_cpus(options_, &why_cpu);
  if (!cpus_) {
    logger().info("zeusd: no RAPL CPUs ({}); cpu-read answers for an empty set", why_cpu);
  }
  PodOfGpu pod_of;
  if (!options_.kubelet_socket.empty()) {
    for (int g = 0; gpu_set_ && g < gpu_set_->count(); ++g) {
      gpu_device_ids_.emplace_back(gpu_set_->uuid(g), gpu_set_->pci_address(g));
    }
    pod_of = [this](int gpu) -> std::optional<kube::DeviceOwner> {
      const kube::PodResourcesWatcher* watcher = watcher_.load();
      if (watcher == nullptr || gpu < 0 || static_cast<size_t>(gpu) >= gpu_device_ids_.size()) {
        return std::nullopt;
      }
      const auto& [uuid, pci] = gpu_device_ids_[static_cast<size_t>(gpu)];
      return watcher->owner_of_gpu(uuid, pci);
    };
  }
  LeaseKeeperOptions lease_options{options_.state_dir / "leases.json",
                                   options_.state_dir / "audit.jsonl",
                                   options_.require_gpu_process,
                                   pod_of,
                                   {}};
  if (!options_.kubelet_device_checkpoint.empty()) {
    PodAuthorityOptions authority{.checkpoint = options_.kubelet_device_checkpoint,
                                  .gpu_of = gpu_of_device(gpu_set_.get())};
    authority.owner_of = [this](const std::string& id) -> std::optional<kube::DeviceOwner> {
      const kube::PodResourcesWatcher* watcher = watcher_.load();
      return watcher != nullptr ? watcher->owner(id) : std::nullopt;
    };
    authority_ = std::make_unique<PodAuthority>(std::move(authority));
    lease_options.authorize = [this](const Actor& actor, int gpu) {
      authority_->check(actor, gpu);
    };
    logger().info("zeusd: a client in a pod changes only its pod's GPUs (the kubelet's {})",
                  options_.kubelet_device_checkpoint.string());
  }
  leases_ = std::make_unique<LeaseKeeper>(*gpus_, std::move(lease_options));
  streams_ = std::make_unique<PowerStreams>(*gpus_, cpus_.get(), options_.streams);
  jobs_ = std::make_unique<JobEnergyBook>(
      *gpus_, JobEnergyOptions{.file = options_.state_dir / "job_energy.json", .pod_of = pod_of});
  if (!options_.kubelet_socket.empty()) {
    kube::WatcherOptions watch;
    watch.period = options_.kubelet_period;
    watch.forget_after = 6 * options_.kubelet_period;
    watch.mig_parent = mig_parent_of(gpu_set_.get());
    watch.on_answer = [this,
                       gpu_of = gpu_of_device(gpu_set_.get())](const kube::DeviceOwners& owners) {
      update_pod_records(*jobs_, owners, gpu_of);
    };
    pods_ = std::make_unique<kube::PodResourcesWatcher>(options_.kubelet_socket, watch);
    watcher_.store(pods_.get());
    logger().info("zeusd: GPUs named by the pods the kubelet at {} lists, read every {} ms",
                  options_.kubelet_socket, options_.kubelet_period.count());
  }
  options_.metrics.pod_of = pod_of;
  api_ = std::make_unique<Api>(options_.api, *gpus_, cpus_.get(), *leases_, *streams_, jobs_.get());
  if (!options_.metrics.bind_address.empty()) {
    metrics_ =
        std::make_unique<NodeMetrics>(options_.metrics, gpu_set_.get(), cpus_.get(), *leases_);
  }
  server_ = std::make_unique<http::Server>(
      options_.server, [this](const http::Request& r) { return api_->handle(r); });
  logger().info("zeusd: serving {} on {}", fmt::join(api_->enabled_groups(), ","),
                server_->address());
}

Daemon::~Daemon() = default;

}  // namespace zeus::daemon
