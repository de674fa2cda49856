#include "zeus/device/zeusd/zeusd_gpu_set.h"

#include <fmt/format.h>

namespace zeus::device::zeusd {

ZeusdGpuSet::ZeusdGpuSet(std::unique_ptr<GpuSet> inner, const ZeusdEndpoint& endpoint)
    : inner_(std::move(inner)), client_(endpoint) {}

ZeusdGpuSet::~ZeusdGpuSet() = default;

std::string ZeusdGpuSet::describe(int gpu) const {
  return fmt::format("{}; limits set by {}", inner_->describe(gpu), client_.endpoint().describe());
}

std::string ZeusdGpuSet::limits_through() const {
  return client_.endpoint().describe();
}

void ZeusdGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  inner_->validate_power_limit_mw(gpu, limit_mw);
  client_.set_power_limit_mw(machine_index(gpu), limit_mw);
}

void ZeusdGpuSet::set_persistence_mode(int gpu, bool enabled) {
  client_.gpu_command(machine_index(gpu), "set_persistence_mode",
                      enabled ? "enabled=true" : "enabled=false",
                      enabled ? "persistence mode on" : "persistence mode off");
}

void ZeusdGpuSet::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  client_.gpu_command(machine_index(gpu), "set_gpu_locked_clocks",
                      fmt::format("min_clock_mhz={}&max_clock_mhz={}", min_mhz, max_mhz),
                      fmt::format("GPU clocks {}-{} MHz", min_mhz, max_mhz));
}

void ZeusdGpuSet::reset_gpu_locked_clocks(int gpu) {
  client_.gpu_command(machine_index(gpu), "reset_gpu_locked_clocks", "", "resetting GPU clocks");
}

void ZeusdGpuSet::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  client_.gpu_command(machine_index(gpu), "set_mem_locked_clocks",
                      fmt::format("min_clock_mhz={}&max_clock_mhz={}", min_mhz, max_mhz),
                      fmt::format("memory clocks {}-{} MHz", min_mhz, max_mhz));
}

void ZeusdGpuSet::reset_mem_locked_clocks(int gpu) {
  client_.gpu_command(machine_index(gpu), "reset_mem_locked_clocks", "", "resetting memory clocks");
}

}  // namespace zeus::device::zeusd
