// A fake AMD machine for tests: the state file of tests/fakes/fake_amdsmi.cpp, with
// ZEUS_AMDSMI_LIBRARY and FAKE_AMDSMI_STATE pointed at the fake and the file for the scope (child
// processes inherit both). ROCm's prefix of the fake (its lib/ holds libamd_smi.so.26 and
// libamd_smi.so) is fake_rocm_path(), for tests of the library search and of AMD's own package.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace zeus::test {

struct FakeAmdGpu {
  std::string name = "AMD Instinct MI300X";
  std::string uuid;
  std::string bdf;
  int hip_id = 0;
  double power_w = 300;
  std::optional<double> average_w;
  bool power_available = true;
  bool current_available = true;
  bool energy_counter = true;
  double energy_rate = 1.0;  // the counter's rate against power x time
  uint64_t cap_uw = 750'000'000;
  uint64_t min_cap_uw = 200'000'000;
  uint64_t max_cap_uw = 750'000'000;
  uint64_t default_cap_uw = 750'000'000;
  std::optional<int> temperature_c = 45;
};

// `n` MI300X GPUs with UUIDs GPU-amd0000000000000<i>, BDFs 0000:<0c+16i>:00.0, HIP order = list
// order, power 300 + 10 i W.
std::vector<FakeAmdGpu> mi300xs(int n);

struct FakeAmdsmiOptions {
  bool permissive = true;  // a non-root process may set caps (the real library refuses it)
};

class FakeAmdsmi : public FakeMachine {
 public:
  explicit FakeAmdsmi(std::vector<FakeAmdGpu> gpus, FakeAmdsmiOptions options = {});
  uint64_t cap_uw(int index) const;
  // What amdsmi_get_lib_version reports: {"major", "minor", "release"} (ABI 26) or with "year"
  // (ABI 24/25 layouts).
  void update_version(const nlohmann::json& version);
  // (gpu, cap in uW) of every successful set, in order.
  std::vector<std::pair<int, uint64_t>> cap_history() const;
  static std::filesystem::path fake_rocm_path();

 private:
  std::optional<ScopedEnv> library_env_;
  std::optional<ScopedEnv> state_env_;
};

}  // namespace zeus::test
