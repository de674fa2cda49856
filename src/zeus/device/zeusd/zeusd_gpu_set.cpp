#include "zeus/device/zeusd/zeusd_gpu_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/parse.h"

namespace zeus::device::zeusd {

int daemon_gpu_id(const GpuSet& local, int gpu, const std::vector<DaemonGpu>& daemon,
                  const std::string& where) {
  const std::string uuid = to_lower(local.uuid(gpu));
  const std::string pci = to_lower(local.pci_address(gpu));
  bool daemon_has_identities = false;
  for (const DaemonGpu& d : daemon) {
    daemon_has_identities = daemon_has_identities || !d.uuid.empty() || !d.pci_address.empty();
    if (!uuid.empty() && to_lower(d.uuid) == uuid) {
      return d.id;
    }
  }
  for (const DaemonGpu& d : daemon) {
    if (!pci.empty() && to_lower(d.pci_address) == pci) {
      return d.id;
    }
  }
  if (!daemon_has_identities || pci.empty()) {
    return local.machine_index(gpu);
  }
  std::vector<std::string> listed;
  for (const DaemonGpu& d : daemon) {
    listed.push_back(fmt::format("{} {}", d.id, d.uuid.empty() ? d.pci_address : d.uuid));
  }
  throw ConfigError(fmt::format(
      "GPU {} ({}, PCI {}) is none of the GPUs of {} ({}): that daemon runs on another node, or "
      "does not see this GPU; point ZEUSD_SOCK_PATH at this node's zeusd",
      gpu, local.uuid(gpu), local.pci_address(gpu), where,
      listed.empty() ? "it lists none" : fmt::format("{}", fmt::join(listed, ", "))));
}

ZeusdGpuSet::ZeusdGpuSet(std::unique_ptr<GpuSet> inner, const ZeusdEndpoint& endpoint)
    : inner_(std::move(inner)), client_(endpoint) {}

ZeusdGpuSet::~ZeusdGpuSet() = default;

std::string ZeusdGpuSet::describe(int gpu) const {
  return fmt::format("{}; limits set by {}", inner_->describe(gpu), client_.endpoint().describe());
}

std::string ZeusdGpuSet::limits_through() const {
  return client_.endpoint().describe();
}

int ZeusdGpuSet::daemon_id(int gpu) {
  check_index(gpu);
  std::lock_guard lock(ids_mu_);
  if (!daemon_gpus_) {
    daemon_gpus_ = client_.discover_gpus();
    for (int g = 0; g < inner_->count(); ++g) {
      try {
        logger().debug("GPU {} ({}) is GPU {} of {}", g, inner_->uuid(g),
                       daemon_gpu_id(*inner_, g, *daemon_gpus_, client_.endpoint().describe()),
                       client_.endpoint().describe());
      } catch (const ConfigError&) {
        // said when that GPU is changed
      }
    }
  }
  return daemon_gpu_id(*inner_, gpu, *daemon_gpus_, client_.endpoint().describe());
}

void ZeusdGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  inner_->validate_power_limit_mw(gpu, limit_mw);
  client_.set_power_limit_mw(daemon_id(gpu), limit_mw);
}

void ZeusdGpuSet::set_persistence_mode(int gpu, bool enabled) {
  client_.gpu_command(daemon_id(gpu), "set_persistence_mode",
                      enabled ? "enabled=true" : "enabled=false",
                      enabled ? "persistence mode on" : "persistence mode off");
}

void ZeusdGpuSet::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  client_.gpu_command(daemon_id(gpu), "set_gpu_locked_clocks",
                      fmt::format("min_clock_mhz={}&max_clock_mhz={}", min_mhz, max_mhz),
                      fmt::format("GPU clocks {}-{} MHz", min_mhz, max_mhz));
}

void ZeusdGpuSet::reset_gpu_locked_clocks(int gpu) {
  client_.gpu_command(daemon_id(gpu), "reset_gpu_locked_clocks", "", "resetting GPU clocks");
}

void ZeusdGpuSet::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  client_.gpu_command(daemon_id(gpu), "set_mem_locked_clocks",
                      fmt::format("min_clock_mhz={}&max_clock_mhz={}", min_mhz, max_mhz),
                      fmt::format("memory clocks {}-{} MHz", min_mhz, max_mhz));
}

void ZeusdGpuSet::reset_mem_locked_clocks(int gpu) {
  client_.gpu_command(daemon_id(gpu), "reset_mem_locked_clocks", "", "resetting memory clocks");
}

}  // namespace zeus::device::zeusd
