#include "zeus/job/job_metrics.h"

#include "zeus/common/power.h"
#include "zeus/metrics/pushgateway.h"

namespace zeus::job {

JobState job_state(const JobCore& core, const optimize::PowerLimitProfiler* profiler,
                   int epochs_done, int64_t limit_mw, int64_t max_limit_mw,
                   std::optional<double> next_epoch_cost, double cost_threshold, bool finished) {
  JobState s;
  s.epochs_done = epochs_done;
  s.energy_j = core.total_energy_j();
  s.time_s = core.total_time_s();
  s.cost = core.cost().cost(s.energy_j, s.time_s);
  s.power_limit_mw = limit_mw;
  s.optimal_power_limit_mw = profiler != nullptr ? profiler->optimal_limit_mw() : std::nullopt;
  s.max_power_limit_mw = max_limit_mw;
  s.phase = profiler == nullptr ? JobState::Phase::kMeasureOnly
            : profiler->done()  ? JobState::Phase::kOptimal
                                : JobState::Phase::kProfiling;
  s.next_epoch_cost = next_epoch_cost;
  s.cost_threshold = cost_threshold;
  s.finished = finished;
  return s;
}

using metrics::Family;
using metrics::MetricType;

std::vector<Family> job_families(const JobState& s) {
  const auto gauge = [](std::string name, std::string help) {
    return Family{std::move(name), std::move(help), MetricType::kGauge, {}};
  };
  std::vector<Family> out;
  out.push_back(gauge("zeus_job_epoch", "Epochs the job has finished").add({}, s.epochs_done));
  out.push_back(gauge("zeus_job_energy_joules", "Energy of all the job's GPUs so far (J)")
                    .add({}, s.energy_j));
  out.push_back(gauge("zeus_job_time_seconds", "Training time so far (s)").add({}, s.time_s));
  out.push_back(gauge("zeus_job_cost",
                      "Zeus's cost so far: eta * energy + (1 - eta) * "
                      "MAXPOWER * time (J)")
                    .add({}, s.cost));
  out.push_back(gauge("zeus_job_power_limit_watts", "Power limit the job's GPUs run at (W)")
                    .add({}, mw_to_w(s.power_limit_mw)));
  Family optimal = gauge("zeus_job_optimal_power_limit_watts",
                         "The limit profiling chose (W); no series while profiling");
  if (s.optimal_power_limit_mw) {
    optimal.add({}, mw_to_w(*s.optimal_power_limit_mw));
  }
  out.push_back(std::move(optimal));
  out.push_back(gauge("zeus_job_max_power_limit_watts", "The GPUs' highest power limit (W)")
                    .add({}, mw_to_w(s.max_power_limit_mw)));
  Family phase = gauge("zeus_job_phase", "1 for the job's current phase, 0 for the others");
  phase.add({{"phase", "profiling"}}, s.phase == JobState::Phase::kProfiling ? 1 : 0);
  phase.add({{"phase", "optimal"}}, s.phase == JobState::Phase::kOptimal ? 1 : 0);
  phase.add({{"phase", "measure_only"}}, s.phase == JobState::Phase::kMeasureOnly ? 1 : 0);
  out.push_back(std::move(phase));
  Family next = gauge("zeus_job_next_epoch_cost",
                      "Forecast cost after one more epoch (J); the job stops before it would "
                      "reach the threshold");
  if (s.next_epoch_cost) {
    next.add({}, *s.next_epoch_cost);
  }
  out.push_back(std::move(next));
  out.push_back(gauge("zeus_job_cost_threshold", "The cost the job stops before (J; +Inf: none)")
                    .add({}, s.cost_threshold));
  out.push_back(gauge("zeus_job_finished", "1 once the job has ended").add({}, s.finished));
  return out;
}

JobMetrics::JobMetrics(const std::string& url, const std::string& job_id)
    : pusher_(std::make_unique<metrics::Pusher>(metrics::PushgatewayOptions{url, job_id})) {}

JobMetrics::~JobMetrics() = default;

void JobMetrics::push(const JobState& state) {
  pusher_->push(job_families(state));
}

}  // namespace zeus::job
