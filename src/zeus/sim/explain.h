// Where a simulated job's cumulative energy went against the oracle (the best static batch size
// and power limit in hindsight, run every recurrence): the answer to "why did it save only 11%
// here". The parts add up to the whole gap, zeus_energy_j - recurrences x oracle.energy_j.
#pragma once

#include <string_view>
#include <vector>

#include "zeus/sim/simulator.h"

namespace zeus::sim {

struct EnergyGap {
  // Pruning tries that did not reach the target (failed, early-stopped, or capped): all of
  // their energy.
  double pruning_failed_j = 0;
  // Pruning tries that reached, beyond what the oracle spends on a recurrence.
  double pruning_worse_j = 0;
  // Thompson-sampling tries after pruning (exploration, and runs that were unlucky or lucky:
  // the oracle is an expectation over runs), beyond the oracle.
  double thompson_j = 0;
  // The profiled epochs of each batch size's first try, beyond the same epochs at its limit.
  double profiling_j = 0;
  // The first recurrence (b0, which must reach), beyond the oracle.
  double first_recurrence_j = 0;

  double total_j() const {
    return pruning_failed_j + pruning_worse_j + thompson_j + profiling_j + first_recurrence_j;
  }
};

// The parts' names, in the order of the fields, for tables.
struct GapPart {
  std::string_view name;
  double EnergyGap::*field;
};
const std::vector<GapPart>& gap_parts();

EnergyGap explain(const SimulationResult& result);

}  // namespace zeus::sim
