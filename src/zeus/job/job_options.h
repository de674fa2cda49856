// The options of one energy-optimized training job (what zeus::DataLoader's train loader runs),
// and their resolution: a value set in code wins, then the ZEUS_* variable of the original Zeus,
// then the default. Bad values are rejected with the name, the value and the accepted range.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/grid/signal.h"
#include "zeus/optimize/bso_server_rules.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::job {

// The batch-size service (`zeus bso-server`, or Zeus 0.16's server; docs/bso-server.md): with a
// URL, the train loader's global batch size is the one the service hands out for this job (its
// job id), and each epoch's totals and metric go back to it (job/batch_size_trial.h).
struct BatchSizeServiceOptions {
  std::optional<std::string> url;             // ZEUS_BSO_SERVER_URL; unset: no service
  std::vector<int64_t> batch_sizes;           // global sizes to choose from; ZEUS_BSO_BATCH_SIZES
  std::optional<int64_t> default_batch_size;  // default: the loader's batch size x world size
  std::optional<double> beta = 2.0;           // stop at beta x the job's best cost; nullopt: never
  std::optional<int64_t> mab_seed;            // the service's bandit seed (reproducible draws)
  // zeus-cpp's service only: the job's policy (zeus | lean) and lean's knobs; unset: the
  // server's --policy.
  std::optional<std::string> policy;
  std::string lean;
};

// Power limits that follow the grid (job/grid_limits.h, docs/grid.md): after profiling, the limit
// is chosen again on Zeus's profile as carbon intensity or price moves. One signal at most.
struct GridSignalOptions {
  // ZEUS_CARBON_INTENSITY: a trace file, or ElectricityMaps' API (an http(s):// base URL, with
  // `location`).
  std::optional<std::string> carbon_intensity;
  std::optional<std::string> location;           // ZEUS_CARBON_LOCATION: "lat,lon"
  std::optional<std::string> electricity_price;  // ZEUS_ELECTRICITY_PRICE: a trace file
  // The signal at which the choice is Zeus's: ZEUS_MAX_CARBON_INTENSITY or ZEUS_MAX_PRICE
  // ("grid", the default: the grid's own mean over the last day; "chase": 750 gCO2eq/kWh; a
  // number). 0 here is the grid's own (optimize::kGridReference).
  std::optional<double> signal_max;
  std::optional<std::chrono::nanoseconds> interval;  // ZEUS_GRID_INTERVAL, 30m
  std::optional<std::chrono::nanoseconds> poll;      // ZEUS_GRID_POLL, 5m
};

struct JobOptions {
  // Unset fields take their ZEUS_* variable, then the default.
  std::optional<double> eta;             // ZEUS_ETA_KNOB, 0.5, in [0, 1]
  std::optional<double> cost_threshold;  // ZEUS_COST_THRESH, inf, > 0 (J)
  std::optional<double> target_metric;   // ZEUS_TARGET_METRIC, required
  bool higher_is_better = true;          // accuracy: true; loss or error: false
  std::optional<int> warmup_iters;       // ZEUS_PROFILE_PARAMS="10,40"
  std::optional<int> profile_iters;
  std::optional<std::filesystem::path> log_dir;  // ZEUS_LOG_DIR, zeus_log
  std::optional<std::string> job_id;             // ZEUS_JOB_ID, zeus
  std::optional<bool> observer_mode;  // !ZEUS_USE_OPTIMAL_PL, false: profile but stay at max
  // ZEUS_MEASURE_ONLY, false: never set a limit; measure each epoch at the GPUs' own limits.
  std::optional<bool> measure_only;
  std::optional<std::string> device;          // ZEUS_DEVICE, auto: NVML; or sim:<gpu>[...]
  std::optional<device::SimClock> sim_clock;  // ZEUS_SIM_CLOCK, virtual
  std::string selector = "cost";              // cost | energy | time | slowdown:<f>
  // ZEUS_POWER_LIMIT_PLAN, per_gpu: data-parallel jobs plan one limit per GPU; false: Zeus's one.
  std::optional<bool> per_gpu_limits;
  // With per-GPU limits: re-plan when a GPU's pace changes mid-run (false: keep the first plan).
  bool follow_gpu_pace = true;
  int64_t power_limit_step_mw = 25'000;
  std::chrono::milliseconds monitor_period{100};  // per-epoch power logs
  std::optional<bool> progress_bar;               // default: the master's stderr is a TTY
  BatchSizeServiceOptions batch_size_service;
  // ZEUS_PUSHGATEWAY_URL: the master pushes the job's state there (job/job_metrics.h); unset or
  // empty: no push.
  std::optional<std::string> pushgateway_url;
  GridSignalOptions grid;
};

// The service's job as the loader registers it; the GPU fields (max power, count, model) are
// the job's to fill in once it has opened its GPUs.
struct ResolvedService {
  std::string url;
  optimize::bso::JobParams params;
  bool policy_given = false;
};

struct ResolvedGrid {
  grid::SignalKind kind = grid::SignalKind::kCarbonIntensity;
  std::string source;  // the trace file, or ElectricityMaps' base URL
  bool api = false;    // source is ElectricityMaps' API
  double latitude = 0;
  double longitude = 0;
  std::string token;      // ZEUS_ELECTRICITYMAPS_TOKEN
  double signal_max = 0;  // optimize::kGridReference: the grid's own
  std::chrono::nanoseconds interval{std::chrono::minutes(30)};
  std::chrono::nanoseconds poll{std::chrono::minutes(5)};
};

struct ResolvedJobOptions {
  double eta = 0.5;
  double cost_threshold = 0;
  double target_metric = 0;
  bool higher_is_better = true;
  int warmup_iters = 10;
  int profile_iters = 40;
  std::filesystem::path log_dir;
  // Where the power-limit journals go: the launcher's ZEUS_JOURNAL_DIR (the journal handshake,
  // contract/worker_env.h), else log_dir.
  std::filesystem::path journal_dir;
  std::string job_id;
  bool observer_mode = false;
  bool measure_only = false;
  std::string device;
  device::SimClock sim_clock = device::SimClock::kVirtual;
  optimize::SelectorOptions selector;
  bool per_gpu_limits = true;
  bool follow_gpu_pace = true;
  int64_t power_limit_step_mw = 25'000;
  std::chrono::milliseconds monitor_period{100};
  bool progress_bar = false;
  int max_epochs = 0;
  int64_t per_rank_batch_size = 0;
  int64_t global_batch_size = 0;           // per rank x world size: names the job's files
  std::optional<ResolvedService> service;  // set: the batch size comes from the service
  std::string pushgateway_url;             // empty: no push
  std::optional<ResolvedGrid> grid;        // set: the limit follows the grid after profiling
};

// Throws ConfigError naming the option (and its variable), the value and what is accepted.
ResolvedJobOptions resolve_job_options(const JobOptions& options, int max_epochs,
                                       int64_t per_rank_batch_size, int world_size);

// "10,40" -> {10, 40}; ConfigError naming `what` otherwise.
std::pair<int, int> parse_profile_params(std::string_view text, std::string_view what);
// true/false/1/0/yes/no/on/off, any case; ConfigError naming `what` otherwise.
bool parse_bool(std::string_view text, std::string_view what);

}  // namespace zeus::job
