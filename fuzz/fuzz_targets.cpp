#include "fuzz_targets.h"

#include "zeus/common/errors.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/optimize/power_profile.h"
#include "zeus/trace/power_trace.h"
#include "zeus/trace/train_trace.h"

namespace zeus::fuzz {

void fuzz_trace_csv(std::string_view text) {
  try {
    const auto power = trace::PowerTrace::parse(text, "fuzz.csv");
    (void)power.min_power_limit_w();
    (void)power.max_power_limit_w();
    for (const auto& workload : trace::all_workloads()) {
      for (const int64_t bs : power.batch_sizes(workload.dataset)) {
        try {
          const auto profile = power.profile(workload.dataset, bs);
          (void)profile.time_per_epoch_s(175.0);
          (void)profile.average_power_w(1e9);
        } catch (const Error&) {
        }
      }
    }
  } catch (const Error&) {
  }
  try {
    const auto train = trace::TrainTrace::parse(text, "fuzz.csv");
    for (const auto& row : train.rows()) {
      (void)train.target_epochs(row.dataset, row.network, row.optimizer, row.batch_size,
                                row.target_metric);
    }
  } catch (const Error&) {
  }
}

void fuzz_profile_json(std::string_view text) {
  try {
    const auto profile = optimize::power_profile_from_json(text, "fuzz.json");
    const auto again = optimize::power_profile_from_json(optimize::to_json(profile), "again.json");
    ZEUS_ASSERT(again.optimal_power_limit_mw == profile.optimal_power_limit_mw,
                "round trip changed the optimal limit: {} -> {}", profile.optimal_power_limit_mw,
                again.optimal_power_limit_mw);
    ZEUS_ASSERT(again.train.size() == profile.train.size(), "round trip lost limits: {} -> {}",
                profile.train.size(), again.train.size());
  } catch (const InternalError&) {
    throw;
  } catch (const Error&) {
  }
  try {
    (void)optimize::observation_from_json_line(text, "fuzz.jsonl:1");
  } catch (const Error&) {
  }
}

}  // namespace zeus::fuzz
