// A training job's state as Prometheus metrics, pushed by the global master to a Pushgateway
// (ZEUS_PUSHGATEWAY_URL) at each epoch end and at the end of the job, grouped by job = the job
// id. Note [job metrics] in docs/metrics.md lists them. Pushing never blocks training (a failed
// push is logged once and dropped); the last state is flushed at exit, at most 2 s.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/job/job_core.h"
#include "zeus/metrics/exposition.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus::metrics {
class Pusher;
}

namespace zeus::job {

struct JobState {
  enum class Phase { kProfiling, kOptimal, kMeasureOnly };
  int epochs_done = 0;
  double energy_j = 0;  // all GPUs of the job, since it started
  double time_s = 0;
  double cost = 0;  // eta * energy + (1 - eta) * MAXPOWER * time
  int64_t power_limit_mw = 0;
  std::optional<int64_t> optimal_power_limit_mw;
  int64_t max_power_limit_mw = 0;
  Phase phase = Phase::kProfiling;
  std::optional<double> next_epoch_cost;  // the forecast after one more epoch, once there is one
  double cost_threshold = 0;              // +Inf: none
  bool finished = false;
};

// The state from the job's ledger and its profiler (null: measure-only).
JobState job_state(const JobCore& core, const optimize::PowerLimitProfiler* profiler,
                   int epochs_done, int64_t limit_mw, int64_t max_limit_mw,
                   std::optional<double> next_epoch_cost, double cost_threshold, bool finished);

// The families, every one declared (`zeus_job_phase` has one series per phase, 1 for the
// current one).
std::vector<metrics::Family> job_families(const JobState& state);

class JobMetrics {
 public:
  // Pushes to `url`/metrics/job/<job_id>. Throws ConfigError for a bad URL or job id.
  JobMetrics(const std::string& url, const std::string& job_id);
  ~JobMetrics();  // flushes the last state (at most 2 s)
  JobMetrics(const JobMetrics&) = delete;
  JobMetrics& operator=(const JobMetrics&) = delete;

  void push(const JobState& state);

 private:
  std::unique_ptr<metrics::Pusher> pusher_;
};

}  // namespace zeus::job
