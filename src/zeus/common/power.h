// Power and energy units. NVML and the files Zeus writes speak milliwatts (power logs) and
// millijoules (energy counters); people, costs and results speak watts and joules. These are
// the only conversions: no `/ 1000` in the code that uses them.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

namespace zeus {

// A GPU's settable power-limit range, in milliwatts (a value type the optimizer and the devices
// share, so it lives below both).
struct PowerLimitRange {
  int64_t min_mw = 0;
  int64_t max_mw = 0;
};

constexpr double mw_to_w(int64_t mw) {
  return static_cast<double>(mw) / 1000.0;
}
constexpr double mw_to_w(double mw) {
  return mw / 1000.0;
}
// Rounded to the nearest milliwatt.
inline int64_t w_to_mw(double w) {
  return std::llround(w * 1000.0);
}
constexpr double mj_to_j(int64_t mj) {
  return static_cast<double>(mj) / 1000.0;
}
constexpr double mj_to_j(double mj) {
  return mj / 1000.0;
}
// RAPL counts microjoules.
constexpr double uj_to_mj(int64_t uj) {
  return static_cast<double>(uj) / 1000.0;
}
constexpr double uj_to_j(int64_t uj) {
  return static_cast<double>(uj) / 1e6;
}
// Energy in mJ of `power_w` drawn for `elapsed` (W x ns = 1e-6 mJ).
constexpr double energy_mj(double power_w, std::chrono::nanoseconds elapsed) {
  return power_w * static_cast<double>(elapsed.count()) / 1e6;
}
inline int64_t j_to_mj(double j) {
  return std::llround(j * 1000.0);
}
// Whole watts, where a limit is known to be whole (the traces', integer JSON keys): truncates.
constexpr int64_t whole_w(int64_t mw) {
  return mw / 1000;
}

}  // namespace zeus
