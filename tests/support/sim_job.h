// The job options the EnergyJob tests share: a simulated V100 with 1 + 2 iteration windows, so
// a 30-step epoch profiles all 7 limits; no progress bar.
#pragma once

#include <filesystem>

#include "zeus/job/energy_job.h"
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

// One epoch of `train` steps and `eval` steps, reporting `metric`.
inline void run_epoch(job::EnergyJob& job, int train, int eval, double metric) {
  job.begin_train_epoch(train);
  for (int i = 0; i < train; ++i) {
    job.train_step_begin();
    job.train_step_end();
  }
  job.end_train_epoch();
  job.begin_eval_epoch(eval);
  for (int i = 0; i < eval; ++i) {
    job.eval_step_end();
  }
  job.end_eval_epoch();
  job.report_metric(metric);
}

}  // namespace zeus::test
