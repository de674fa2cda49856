// The job options the EnergyJob tests share: a simulated V100 with 1 + 2 iteration windows, so
// a 30-step epoch profiles all 7 limits; no progress bar.
#pragma once

#include <filesystem>

#include "zeus/job/job_options.h"

namespace zeus::test {

inline job::JobOptions quick_sim_job(const std::filesystem::path& log_dir) {
  job::JobOptions o;
  o.target_metric = 0.99;
  o.device = "sim:v100";
  o.log_dir = log_dir;
  o.warmup_iters = 1;
  o.profile_iters = 2;
  o.progress_bar = false;
  return o;
}

}  // namespace zeus::test
