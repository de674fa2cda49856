// CpuSet over Linux powercap RAPL: /sys/class/powercap/intel-rapl:N (package) and its "dram"
// sub-zone. The root is injectable so tests run against a fake tree.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/cpu_set.h"

namespace zeus::device::rapl {

struct RaplCpuSetOptions {
  // Powercap root; empty: $ZEUS_RAPL_ROOT, else /sys/class/powercap.
  std::filesystem::path root;
};

// Throws NotSupported when the root has no package zones, PermissionError naming the file when
// energy_uj is unreadable (root-only since Linux 5.10), IoError/ConfigError for bad contents.
class RaplCpuSet final : public CpuSet {
 public:
  explicit RaplCpuSet(RaplCpuSetOptions options = {});

  int count() const override { return static_cast<int>(packages_.size()); }
  std::string name(int cpu) const override;
  int64_t energy_uj(int cpu) override;
  bool has_dram(int cpu) const override;
  std::optional<int64_t> dram_energy_uj(int cpu) override;

 private:
  // One energy counter, with the accumulated energy across wraps.
  struct Counter {
    std::filesystem::path energy_path;
    int64_t range_uj = 0;
    int64_t last_raw_uj = 0;
    int64_t total_uj = 0;
  };
  struct Package {
    std::string name;
    Counter package;
    std::optional<Counter> dram;
  };
  static Counter open_counter(const std::filesystem::path& zone);
  static int64_t read_counter(Counter& counter);
  void check_index(int cpu) const;

  std::filesystem::path root_;
  std::vector<Package> packages_;
  std::mutex mu_;
};

}  // namespace zeus::device::rapl
