#include "zeus/sim/explain.h"

namespace zeus::sim {

const std::vector<GapPart>& gap_parts() {
  static const std::vector<GapPart> parts{
      {"pruning, not reached", &EnergyGap::pruning_failed_j},
      {"pruning, reached at a worse size", &EnergyGap::pruning_worse_j},
      {"thompson sampling", &EnergyGap::thompson_j},
      {"power-limit profiling", &EnergyGap::profiling_j},
      {"first recurrence", &EnergyGap::first_recurrence_j},
  };
  return parts;
}

EnergyGap explain(const SimulationResult& result) {
  EnergyGap gap;
  const double oracle_j = result.oracle.energy_j;
  // Each recurrence is charged the oracle's energy once: on its reaching try, or on its last try
  // when none reached (the tries limit), so the parts add up to the whole gap.
  for (size_t i = 0; i < result.tries.size(); ++i) {
    const TryRecord& t = result.tries[i];
    const bool ends_recurrence =
        t.reached || i + 1 == result.tries.size() || result.tries[i + 1].recurrence != t.recurrence;
    gap.profiling_j += t.profiling_energy_j;
    const double own_j = t.energy_j - t.profiling_energy_j - (ends_recurrence ? oracle_j : 0.0);
    if (t.recurrence == 0) {
      gap.first_recurrence_j += own_j;
    } else if (!t.pruning) {
      gap.thompson_j += own_j;
    } else if (t.reached) {
      gap.pruning_worse_j += own_j;
    } else {
      gap.pruning_failed_j += own_j;
    }
  }
  return gap;
}

}  // namespace zeus::sim
