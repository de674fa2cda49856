// The decisions of Zeus 0.16's batch-size optimizer server (ref-zeus016.md section 2.6), as pure
// functions of one job's stored state: what a report means, which trial to hand out next while
// pruning, and the Gaussian Thompson sampling after it. No database, clock or HTTP here: the
// service (issue #24) loads a Job in a transaction, asks these rules, and stores what they say,
// so that two servers on one database decide as one.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/optimize/bso_policy.h"
#include "zeus/optimize/gaussian_ts.h"

namespace zeus::optimize::bso {

// An error the service answers with upstream's status and {"message": what()}.
class BsoError : public Error {
 public:
  BsoError(int http_status, const std::string& what, std::string field = {})
      : Error(what), http_status_(http_status), field_(std::move(field)) {}
  int http_status() const { return http_status_; }
  // For a 422: the request field that broke a rule ("" when the rule spans several).
  const std::string& field() const { return field_; }

 private:
  int http_status_;
  std::string field_;
};

enum class Stage { kPruning, kMab };
enum class TrialType { kExploration, kConcurrent, kMab };
enum class TrialStatus { kDispatched, kSucceeded, kFailed };

// Upstream's JobSpecFromClient: JobParams and GpuConfig, with its defaults.
struct JobParams {
  std::string job_id;
  std::string job_id_prefix;
  std::vector<int64_t> batch_sizes;
  int64_t default_batch_size = 0;
  double eta_knob = 0.5;
  std::optional<double> beta_knob = 2.0;  // nullopt: no early stop
  double target_metric = 0.50;
  bool higher_is_better_metric = true;
  int64_t max_epochs = 100;
  int64_t num_pruning_rounds = 2;
  int64_t window_size = 0;  // 0: every observation
  double mab_prior_mean = 0.0;
  double mab_prior_precision = 0.0;
  int64_t mab_num_explorations = 2;
  std::optional<int64_t> mab_seed;
  double max_power_w = 0;  // GpuConfig.max_power: the max limit times the GPUs
  int64_t number_of_gpus = 0;
  std::string gpu_model;
  // zeus-cpp's: the job's batch-size policy, upstream's (zeus) unless the job asks for lean
  // (docs/optimizer.md, "--policy lean"). Part of the job's identity, as in zeus tune.
  PolicyChoice policy;

  bool operator==(const JobParams&) const = default;
};

// Upstream's validation (its 422s): sorts batch_sizes ascending; throws BsoError(422) naming the
// field and the rule for an empty or duplicated list, a default outside it, eta outside [0, 1],
// beta <= 0, max_epochs <= 0, negative rounds or explorations, a bad GpuConfig, or a job_id that
// does not start with job_id_prefix.
void validate(JobParams& params);

struct Trial {
  int64_t trial_number = 0;  // 1, 2, ... per job
  int64_t batch_size = 0;
  TrialType type = TrialType::kExploration;
  TrialStatus status = TrialStatus::kDispatched;
  std::optional<double> time_s;
  std::optional<double> energy_j;
  std::optional<bool> converged;
  // zeus-cpp's, beside upstream's columns: the epochs its last report counted, and lean's cap
  // on them (on a downward scan: ceil(cap x the epochs the larger size before it needed)).
  std::optional<int64_t> epochs;
  std::optional<int64_t> epoch_cap;
  // When it was handed out and when its result came (stored, not decided on: the service's
  // timeout of Dispatched trials reads start).
  std::chrono::system_clock::time_point start;
  std::optional<std::chrono::system_clock::time_point> end;
};

// Per batch size in the MAB stage (upstream's GaussianTsArmState): gaussian_ts.h's.
using ArmState = GaussianArm;

struct Job {
  JobParams params;
  Stage stage = Stage::kPruning;
  std::optional<double> min_cost;
  std::optional<int64_t> min_cost_batch_size;
  int64_t exp_default_batch_size = 0;    // upstream's column: the first round's default
  std::optional<std::string> rng_state;  // the MAB's generator when mab_seed is set
  std::vector<Trial> trials;             // in trial_number order
  std::map<int64_t, ArmState> arms;      // the MAB stage's
};

// eta*E + (1-eta)*maxP*T (zeus/utils/metric.py::zeus_cost).
double zeus_cost(const JobParams& params, double energy_j, double time_s);

// Upstream's TrainingResult: cumulative time and energy of the trial so far.
struct Report {
  int64_t trial_number = 0;
  int64_t batch_size = 0;
  double time_s = 0;
  double energy_j = 0;
  double metric = 0;
  int64_t current_epoch = 0;
};

struct ReportDecision {
  bool stop_train = false;
  bool converged = false;
  std::string message;
  // When the trial ends now: it as it must be stored (Succeeded, converged, time, energy), and
  // the job's new minimum cost where this one is lower.
  std::optional<Trial> finished;
  std::optional<double> new_min_cost;
  std::optional<int64_t> new_min_cost_batch_size;
  // In the MAB stage: the refitted arm of the trial's batch size.
  std::optional<ArmState> refit_arm;
};

// POST /report. Throws BsoError(400) for an unknown trial or a batch size that is not the trial's.
ReportDecision decide_report(const Job& job, const Report& report);

// What the pruning stage hands out next: a trial to create, or the end of pruning with the arms
// of the MAB (every batch size that converged in the last round, ascending).
struct NewTrial {
  TrialType type;
  int64_t batch_size;
  std::optional<int64_t> epoch_cap;  // lean's, on a downward scan
};
struct StartMab {
  std::vector<int64_t> arms;
};
// GET /jobs/batch_size while pruning. Throws BsoError(500) when a round leaves no converged batch
// size, with upstream's message.
std::variant<NewTrial, StartMab> next_pruning_step(const Job& job);

// The arm of upstream's GaussianTS fitted to rewards (-cost), from the job's priors.
ArmState fit_arm(const JobParams& params, const std::vector<double>& rewards);
// The rewards an arm is refitted from: the newest Succeeded trials of `batch_size` (at most
// window_size when it is > 0, counting `extra_cost`, the report being stored, as the newest).
std::vector<double> arm_rewards(const Job& job, int64_t batch_size,
                                std::optional<double> extra_cost);
// The MAB's batch size: an arm still short of mab_num_explorations observations, in a random
// order, else the arm whose draw from N(mean, 1/precision) is highest.
int64_t predict_mab(const Job& job, std::mt19937_64& rng);

}  // namespace zeus::optimize::bso
