// What zeus-cpp can measure on the CPUs: RAPL package (and DRAM) energy counters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zeus::device {

// The CPU packages of this machine, indexed 0..count()-1.
//
// Contract: methods may be called from any thread. Energies are cumulative since the set was
// created, in µJ, with counter wraparound handled, provided each counter is read at least once
// per wrap period (about an hour at 60 W for a 2^32 µJ range: the power monitor reads far more
// often). Read failures throw DeviceError/PermissionError naming the file.
class CpuSet {
 public:
  virtual ~CpuSet() = default;
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;

  virtual int count() const = 0;
  // e.g. "package-0".
  virtual std::string name(int cpu) const = 0;
  virtual int64_t energy_uj(int cpu) = 0;
  virtual bool has_dram(int cpu) const = 0;
  // DRAM energy, or std::nullopt when the package has no DRAM zone.
  virtual std::optional<int64_t> dram_energy_uj(int cpu) = 0;

 protected:
  CpuSet() = default;
};

}  // namespace zeus::device
