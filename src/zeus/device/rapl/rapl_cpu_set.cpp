#include "zeus/device/rapl/rapl_cpu_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <regex>

#include "zeus/common/atomic_file.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::device::rapl {
namespace {

std::string read_trimmed(const std::filesystem::path& path) {
  std::string text = read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

int64_t read_int(const std::filesystem::path& path) {
  const std::string text = read_trimmed(path);
  const auto value = parse_number<int64_t>(text);
  if (!value || *value < 0) {
    throw IoError(
        fmt::format("'{}' holds '{}', expected a non-negative integer", path.string(), text));
  }
  return *value;
}

}  // namespace

RaplCpuSet::RaplCpuSet(RaplCpuSetOptions options) : root_(std::move(options.root)) {
  if (root_.empty()) {
    root_ = get_env_or_default(kEnvRaplRoot);
  }
  std::error_code ec;
  std::vector<std::filesystem::path> zones;
  static const std::regex kPackageZone(R"(intel-rapl:\d+)");
  for (const auto& entry : std::filesystem::directory_iterator(root_, ec)) {
    if (std::regex_match(entry.path().filename().string(), kPackageZone)) {
      zones.push_back(entry.path());
    }
  }
  if (zones.empty()) {
    throw NotSupported(fmt::format(
        "no RAPL package zones (intel-rapl:N) under '{}'{}; CPU energy needs an x86 CPU with the "
        "powercap driver (modprobe intel_rapl_common), or drop --cpus",
        root_.string(), ec ? " (" + ec.message() + ")" : std::string()));
  }
  std::sort(zones.begin(), zones.end());
  for (const auto& zone : zones) {
    Package pkg;
    pkg.name = read_trimmed(zone / "name");
    pkg.package = open_counter(zone);
    static const std::regex kSubZone(R"(intel-rapl:\d+:\d+)");
    for (const auto& sub : std::filesystem::directory_iterator(zone, ec)) {
      if (std::regex_match(sub.path().filename().string(), kSubZone) &&
          read_trimmed(sub.path() / "name") == "dram") {
        pkg.dram = open_counter(sub.path());
      }
    }
    packages_.push_back(std::move(pkg));
  }
}

RaplCpuSet::Counter RaplCpuSet::open_counter(const std::filesystem::path& zone) {
  Counter counter;
  counter.energy_path = zone / "energy_uj";
  try {
    counter.range_uj = read_int(zone / "max_energy_range_uj");
    counter.last_raw_uj = read_int(counter.energy_path);
  } catch (const PermissionError& e) {
    throw PermissionError(
        fmt::format("{}; since Linux 5.10 RAPL energy counters are readable only by root: run as "
                    "root, or have an administrator make '{}' readable",
                    e.what(), counter.energy_path.string()));
  }
  if (counter.range_uj <= 0) {
    throw IoError(fmt::format("'{}' is zero: cannot handle counter wraparound",
                              (zone / "max_energy_range_uj").string()));
  }
  return counter;
}

int64_t RaplCpuSet::read_counter(Counter& counter) {
  const int64_t raw = read_int(counter.energy_path);
  // The counter restarts from 0 after max_energy_range_uj; one wrap between reads is assumed.
  const int64_t delta = raw >= counter.last_raw_uj ? raw - counter.last_raw_uj
                                                   : raw + counter.range_uj - counter.last_raw_uj;
  counter.total_uj += delta;
  counter.last_raw_uj = raw;
  return counter.total_uj;
}

void RaplCpuSet::check_index(int cpu) const {
  if (cpu < 0 || cpu >= count()) {
    throw ConfigError(fmt::format("CPU package index {} is out of range: '{}' has {} package(s)",
                                  cpu, root_.string(), count()));
  }
}

std::string RaplCpuSet::name(int cpu) const {
  check_index(cpu);
  return packages_[static_cast<size_t>(cpu)].name;
}

int64_t RaplCpuSet::energy_uj(int cpu) {
  check_index(cpu);
  std::lock_guard lock(mu_);
  return read_counter(packages_[static_cast<size_t>(cpu)].package);
}

bool RaplCpuSet::has_dram(int cpu) const {
  check_index(cpu);
  return packages_[static_cast<size_t>(cpu)].dram.has_value();
}

std::optional<int64_t> RaplCpuSet::dram_energy_uj(int cpu) {
  check_index(cpu);
  std::lock_guard lock(mu_);
  auto& dram = packages_[static_cast<size_t>(cpu)].dram;
  if (!dram) {
    return std::nullopt;
  }
  return read_counter(*dram);
}

}  // namespace zeus::device::rapl
