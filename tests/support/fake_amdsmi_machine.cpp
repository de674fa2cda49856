#include "support/fake_amdsmi_machine.h"

#include <fmt/format.h>

namespace zeus::test {

std::vector<FakeAmdGpu> mi300xs(int n) {
  std::vector<FakeAmdGpu> gpus(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    FakeAmdGpu& g = gpus[static_cast<size_t>(i)];
    g.uuid = fmt::format("GPU-amd000000000000{:x}", i);
    g.bdf = fmt::format("0000:{:02x}:00.0", 0x0c + 16 * i);
    g.hip_id = i;
    g.power_w = 300 + 10 * i;
  }
  return gpus;
}

FakeAmdsmi::FakeAmdsmi(std::vector<FakeAmdGpu> gpus, FakeAmdsmiOptions options)
    : FakeMachine("amdsmi-state.json") {
  nlohmann::json state;
  state["lib_version"] = {{"major", 26}, {"minor", 1}, {"release", 0}};
  state["gpus"] = nlohmann::json::array();
  for (const auto& g : gpus) {
    nlohmann::json j{
        {"name", g.name},
        {"uuid", g.uuid},
        {"bdf", g.bdf},
        {"hip_id", g.hip_id},
        {"power_w", g.power_w},
        {"power_available", g.power_available},
        {"current_available", g.current_available},
        {"energy_counter", g.energy_counter},
        {"energy_rate", g.energy_rate},
        {"cap_uw", g.cap_uw},
        {"min_cap_uw", g.min_cap_uw},
        {"max_cap_uw", g.max_cap_uw},
        {"default_cap_uw", g.default_cap_uw},
        {"gfx_clk",
         {{"cur", 2100}, {"min", 500}, {"max", 2100}, {"hw_min", 500}, {"hw_max", 2100}}},
        {"mem_clk",
         {{"cur", 1300}, {"min", 900}, {"max", 1300}, {"hw_min", 900}, {"hw_max", 1300}}}};
    if (g.average_w) {
      j["average_w"] = *g.average_w;
    }
    if (g.temperature_c) {
      j["temperature_c"] = *g.temperature_c;
    }
    state["gpus"].push_back(std::move(j));
  }
  state["faults"] = nlohmann::json::object();
  state["permissive"] = options.permissive;
  state["limit_history"] = nlohmann::json::array();
  state["settings_history"] = nlohmann::json::array();
  write(state);
  library_env_.emplace("ZEUS_AMDSMI_LIBRARY", ZEUS_FAKE_AMDSMI);
  state_env_.emplace("FAKE_AMDSMI_STATE", state_path_.string());
}

void FakeAmdsmi::update_version(const nlohmann::json& version) {
  update([&](nlohmann::json& s) { s["lib_version"] = version; });
}

uint64_t FakeAmdsmi::cap_uw(int index) const {
  return state()["gpus"][static_cast<size_t>(index)]["cap_uw"].get<uint64_t>();
}

std::vector<std::pair<int, uint64_t>> FakeAmdsmi::cap_history() const {
  std::vector<std::pair<int, uint64_t>> out;
  const nlohmann::json s = state();
  for (const auto& entry : s["limit_history"]) {
    out.emplace_back(entry["gpu"].get<int>(), entry["cap_uw"].get<uint64_t>());
  }
  return out;
}

std::filesystem::path FakeAmdsmi::fake_rocm_path() {
  return std::filesystem::path(ZEUS_FAKE_AMDSMI).parent_path().parent_path();
}

}  // namespace zeus::test
