#include "zeus/job/job_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/units.h"
#include "zeus/grid/electricity_maps.h"
#include "zeus/optimize/grid_rule.h"

namespace zeus::job {

namespace {

double parse_double(const EnvVar& var, const std::string& text) {
  if (iequals(text, "inf")) {
    return std::numeric_limits<double>::infinity();
  }
  const auto value = parse_number<double>(text);
  if (!value || std::isnan(*value)) {
    throw ConfigError(fmt::format("{}='{}' is not a number", var.name, text));
  }
  return *value;
}

// Code value, else the variable, else its default (an empty default means "required").
template <typename T, typename Parse>
std::optional<T> pick(const std::optional<T>& code, const EnvVar& var, Parse parse) {
  if (code) {
    return code;
  }
  if (auto text = get_env(var)) {
    return parse(*text);
  }
  if (var.default_value.empty()) {
    return std::nullopt;
  }
  return parse(std::string(var.default_value));
}

// The service's job: its id is the job's (a recurring job keeps its ZEUS_JOB_ID), the knobs are
// the job's own, so that the service decides on the numbers this job measures.
std::optional<ResolvedService> resolve_service(const BatchSizeServiceOptions& o,
                                               const ResolvedJobOptions& r, int world_size) {
  const std::optional<std::string> url = o.url ? o.url : get_env(kEnvBsoServerUrl);
  if (!url || url->empty()) {
    return std::nullopt;
  }
  ResolvedService s;
  s.url = *url;
  optimize::bso::JobParams& p = s.params;
  p.batch_sizes = o.batch_sizes;
  if (p.batch_sizes.empty()) {
    const auto text = get_env(kEnvBsoBatchSizes);
    for (const auto& word : text ? split(*text, ',') : std::vector<std::string>{}) {
      const auto bs = parse_number<int64_t>(word);
      if (!bs || *bs < 1) {
        throw ConfigError(fmt::format("{}='{}': '{}' is not a positive batch size",
                                      kEnvBsoBatchSizes.name, *text, word));
      }
      p.batch_sizes.push_back(*bs);
    }
  }
  if (p.batch_sizes.empty()) {
    throw ConfigError(fmt::format(
        "the batch-size service ({}) needs the batch sizes to choose from: set "
        "JobOptions::batch_size_service.batch_sizes or {}, e.g. {}=32,64,128 (global sizes)",
        s.url, kEnvBsoBatchSizes.name, kEnvBsoBatchSizes.name));
  }
  for (int64_t bs : p.batch_sizes) {
    if (bs < 1 || bs % world_size != 0) {
      throw ConfigError(fmt::format(
          "the batch-size service's batch size {} does not split over {} ranks: the sizes are "
          "global, each a multiple of the world size",
          bs, world_size));
    }
  }
  p.default_batch_size = o.default_batch_size.value_or(r.global_batch_size);
  p.job_id = r.job_id;
  p.job_id_prefix = r.job_id;
  p.eta_knob = r.eta;
  p.beta_knob = o.beta;
  p.target_metric = r.target_metric;
  p.higher_is_better_metric = r.higher_is_better;
  p.max_epochs = r.max_epochs;
  p.mab_seed = o.mab_seed;
  s.policy_given = o.policy.has_value();
  if (o.policy) {
    p.policy = optimize::parse_policy_choice(*o.policy, o.lean);
  }
  return s;
}

}  // namespace

std::pair<int, int> parse_profile_params(std::string_view text, std::string_view what) {
  const auto parts = split(text, ',');
  std::optional<int> warmup;
  std::optional<int> profile;
  if (parts.size() == 2) {
    warmup = parse_number<int>(parts[0]);
    profile = parse_number<int>(parts[1]);
  }
  if (!warmup || !profile || *warmup < 1 || *profile < 1) {
    throw ConfigError(
        fmt::format("{}='{}': expected \"WARMUP,PROFILE\" iterations per power limit, both >= 1 "
                    "(default \"10,40\")",
                    what, text));
  }
  return {*warmup, *profile};
}

bool parse_bool(std::string_view text, std::string_view what) {
  for (const char* yes : {"true", "1", "yes", "on"}) {
    if (iequals(text, yes)) {
      return true;
    }
  }
  for (const char* no : {"false", "0", "no", "off"}) {
    if (iequals(text, no)) {
      return false;
    }
  }
  throw ConfigError(fmt::format("{}='{}': expected true or false", what, text));
}

namespace {

// ZEUS_CARBON_INTENSITY / ZEUS_ELECTRICITY_PRICE and their knobs; nullopt when neither is set.
std::optional<ResolvedGrid> resolve_grid(const GridSignalOptions& o) {
  const auto carbon = o.carbon_intensity ? o.carbon_intensity : get_env(kEnvCarbonIntensity);
  const auto price = o.electricity_price ? o.electricity_price : get_env(kEnvElectricityPrice);
  if (carbon && price) {
    throw ConfigError(fmt::format("{} and {} are both set: a job follows one signal",
                                  kEnvCarbonIntensity.name, kEnvElectricityPrice.name));
  }
  if (!carbon && !price) {
    return std::nullopt;
  }
  ResolvedGrid g;
  g.kind = carbon ? grid::SignalKind::kCarbonIntensity : grid::SignalKind::kElectricityPrice;
  g.source = carbon ? *carbon : *price;
  g.api = g.source.starts_with("http://") || g.source.starts_with("https://");
  if (g.api) {
    if (!carbon) {
      throw ConfigError(fmt::format("{}='{}': a price is read from a trace file, not a URL",
                                    kEnvElectricityPrice.name, g.source));
    }
    const auto location = o.location ? o.location : get_env(kEnvCarbonLocation);
    if (!location) {
      throw ConfigError(fmt::format(
          "{}='{}' is ElectricityMaps' API: set {}=latitude,longitude (e.g. 42.28,-83.74)",
          kEnvCarbonIntensity.name, g.source, kEnvCarbonLocation.name));
    }
    std::tie(g.latitude, g.longitude) = grid::parse_location(*location, kEnvCarbonLocation.name);
    g.token = get_env(kEnvElectricityMapsToken).value_or("");
  } else if (!std::filesystem::is_regular_file(g.source)) {
    throw ConfigError(fmt::format("{}='{}': no such file (a trace CSV or JSON, or an http(s) URL)",
                                  carbon ? kEnvCarbonIntensity.name : kEnvElectricityPrice.name,
                                  g.source));
  }
  // The grid's own reference unless one is given (Note [grid reference] in grid_rule.h).
  const EnvVar& max_var = carbon ? kEnvMaxCarbonIntensity : kEnvMaxPrice;
  if (o.signal_max) {
    if (!(*o.signal_max >= 0) || !std::isfinite(*o.signal_max)) {
      throw ConfigError(
          fmt::format("the grid reference {} must be a number > 0, or 0 for the "
                      "grid's own",
                      *o.signal_max));
    }
    g.signal_max = *o.signal_max;
  } else {
    g.signal_max = optimize::parse_grid_reference(get_env_or_default(max_var), max_var.name,
                                                  g.kind == grid::SignalKind::kCarbonIntensity);
  }
  g.interval = o.interval
                   ? *o.interval
                   : parse_duration(get_env_or_default(kEnvGridInterval), kEnvGridInterval.name);
  g.poll = o.poll ? *o.poll : parse_duration(get_env_or_default(kEnvGridPoll), kEnvGridPoll.name);
  if (g.interval.count() <= 0 || g.poll.count() <= 0) {
    throw ConfigError(
        fmt::format("{} and {} must be positive", kEnvGridInterval.name, kEnvGridPoll.name));
  }
  return g;
}

}  // namespace

ResolvedJobOptions resolve_job_options(const JobOptions& o, int max_epochs,
                                       int64_t per_rank_batch_size, int world_size) {
  ResolvedJobOptions r;
  if (max_epochs < 1) {
    throw ConfigError(fmt::format("max_epochs {} must be at least 1", max_epochs));
  }
  if (per_rank_batch_size < 1) {
    throw ConfigError(fmt::format("batch_size {} must be at least 1", per_rank_batch_size));
  }
  r.max_epochs = max_epochs;
  if (const auto cap = get_env(kEnvMaxEpochs)) {
    const int epochs = parse_int_or_throw(*cap, kEnvMaxEpochs.name);
    if (epochs < 1) {
      throw ConfigError(
          fmt::format("{}={} must be at least 1 (epochs)", kEnvMaxEpochs.name, epochs));
    }
    r.max_epochs = std::min(max_epochs, epochs);
  }
  r.per_rank_batch_size = per_rank_batch_size;
  r.global_batch_size = per_rank_batch_size * world_size;

  r.eta =
      *pick(o.eta, kEnvEtaKnob, [](const std::string& t) { return parse_double(kEnvEtaKnob, t); });
  if (!(r.eta >= 0 && r.eta <= 1)) {
    throw ConfigError(fmt::format("eta ({}) is {}; it must be in [0, 1]", kEnvEtaKnob.name, r.eta));
  }
  r.cost_threshold = *pick(o.cost_threshold, kEnvCostThresh,
                           [](const std::string& t) { return parse_double(kEnvCostThresh, t); });
  if (!(r.cost_threshold > 0)) {
    throw ConfigError(fmt::format("cost threshold ({}) is {}; it must be > 0 (J), or inf",
                                  kEnvCostThresh.name, r.cost_threshold));
  }
  const auto target = pick(o.target_metric, kEnvTargetMetric,
                           [](const std::string& t) { return parse_double(kEnvTargetMetric, t); });
  if (!target || !std::isfinite(*target)) {
    throw ConfigError(fmt::format(
        "the target metric is missing: set DataLoaderOptions::job.target_metric (the example's "
        "--target-accuracy) or {}, e.g. {}=0.88; training stops when report_metric() reaches it",
        kEnvTargetMetric.name, kEnvTargetMetric.name));
  }
  r.target_metric = *target;
  r.higher_is_better = o.higher_is_better;

  std::pair<int, int> params = parse_profile_params(
      get_env(kEnvProfileParams).value_or(std::string(kEnvProfileParams.default_value)),
      kEnvProfileParams.name);
  r.warmup_iters = o.warmup_iters.value_or(params.first);
  r.profile_iters = o.profile_iters.value_or(params.second);
  if (r.warmup_iters < 1 || r.profile_iters < 1) {
    throw ConfigError(fmt::format("warmup_iters {} and profile_iters {} must both be >= 1",
                                  r.warmup_iters, r.profile_iters));
  }
  r.log_dir = o.log_dir.value_or(get_env_or_default(kEnvLogDir));
  r.journal_dir = get_env(kEnvJournalDir).value_or(r.log_dir.string());
  r.job_id = o.job_id.value_or(get_env_or_default(kEnvJobId));
  if (r.job_id.empty() || r.job_id.find('/') != std::string::npos) {
    throw ConfigError(fmt::format("job id '{}' ({}) must be non-empty and contain no '/'", r.job_id,
                                  kEnvJobId.name));
  }
  r.observer_mode = *pick(o.observer_mode, kEnvUseOptimalPl, [](const std::string& t) {
    return !parse_bool(t, kEnvUseOptimalPl.name);
  });
  r.measure_only = *pick(o.measure_only, kEnvMeasureOnly,
                         [](const std::string& t) { return parse_bool(t, kEnvMeasureOnly.name); });
  r.device = o.device.value_or(get_env_or_default(kEnvDevice));
  r.sim_clock = *pick(o.sim_clock, kEnvSimClock, [](const std::string& t) {
    if (t == "virtual")
      return device::SimClock::kVirtual;
    if (t == "real")
      return device::SimClock::kReal;
    throw ConfigError(fmt::format("{}='{}': expected virtual or real", kEnvSimClock.name, t));
  });
  r.selector = optimize::parse_selector(o.selector);
  r.per_gpu_limits = *pick(o.per_gpu_limits, kEnvPowerLimitPlan, [](const std::string& t) {
    if (t == "per_gpu")
      return true;
    if (t == "global")
      return false;
    throw ConfigError(
        fmt::format("{}='{}': expected per_gpu or global", kEnvPowerLimitPlan.name, t));
  });
  r.follow_gpu_pace = o.follow_gpu_pace;
  if (o.power_limit_step_mw <= 0) {
    throw ConfigError(
        fmt::format("power_limit_step_mw {} must be positive", o.power_limit_step_mw));
  }
  r.power_limit_step_mw = o.power_limit_step_mw;
  if (o.monitor_period < std::chrono::milliseconds(5)) {
    throw ConfigError(
        fmt::format("monitor_period {} ms must be at least 5 ms", o.monitor_period.count()));
  }
  r.monitor_period = o.monitor_period;
  r.progress_bar = o.progress_bar.value_or(isatty(STDERR_FILENO) == 1);
  r.service = resolve_service(o.batch_size_service, r, world_size);
  r.pushgateway_url = o.pushgateway_url.value_or(get_env(kEnvPushgatewayUrl).value_or(""));
  r.grid = resolve_grid(o.grid);
  return r;
}

}  // namespace zeus::job
