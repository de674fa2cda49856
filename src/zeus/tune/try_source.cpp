#include "zeus/tune/try_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "zeus/bso_client/client.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/units.h"
#include "zeus/device/discovery.h"
#include "zeus/optimize/batch_size_optimizer.h"

namespace zeus::tune {

optimize::BatchSizeOptimizerOptions optimizer_options(const TuneOptions& o) {
  const optimize::PolicyChoice choice = optimize::parse_policy_choice(o.policy, o.lean);
  return {.batch_sizes = o.batch_sizes,
          .default_batch_size = o.default_batch_size,
          .beta = o.beta,
          .seed = o.seed,
          .window = o.window,
          .policy = choice.policy,
          .lean = choice.lean};
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class LocalSource final : public TrySource {
 public:
  LocalSource(const TuneOptions& o, const std::vector<TuneTry>& history)
      : optimizer_(optimizer_options(o)) {
    std::vector<optimize::BatchSizeObservation> h;
    for (const auto& t : history) {
      h.push_back({t.batch_size, t.cost, t.reached, t.recurrence_cost, t.num_epochs});
    }
    optimizer_.replay(h);
  }

  PlannedTry next() override {
    PlannedTry p;
    const bool pruning = optimizer_.pruning();
    p.batch_size = optimizer_.next_batch_size();
    p.cost_threshold = optimizer_.cost_threshold();
    p.epoch_cap = static_cast<int>(optimizer_.epoch_cap().value_or(0));
    p.stage = pruning
                  ? fmt::format("pruning {}{}", optimizer_.pruning_round(),
                                p.epoch_cap > 0 ? fmt::format(", <= {} epochs", p.epoch_cap) : "")
                  : std::string("thompson");
    return p;
  }

  void finished(const TuneTry& t, const contract::TrainResult&) override {
    optimizer_.observe({t.batch_size, t.cost, t.reached, t.recurrence_cost, t.num_epochs});
  }

  void abandoned() override {}

  std::string summary() const override {
    return fmt::format("batch sizes left: {}",
                       optimizer_.pruning() ? std::string("(still pruning)")
                                            : fmt::format("{}", fmt::join(optimizer_.arms(), ",")));
  }

 private:
  optimize::BatchSizeOptimizer optimizer_;
};

// The job's GPUs as the service's GpuConfig has them: what the options say, the rest from this
// machine's GPUs (ZEUS_DEVICE, else NVML).
void fill_gpus(const TuneOptions& o, bso::JobParams& p) {
  int count = o.gpus;
  std::string model = o.gpu_model;
  double max_w = o.gpu_max_power_w;
  if (count <= 0 || model.empty() || max_w <= 0) {
    const std::string locator = get_env_or_default(kEnvDevice);
    try {
      const auto set = device::open_gpu_set(locator, {});
      if (set->count() < 1) {
        throw ConfigError("no GPU");
      }
      count = count > 0 ? count : set->count();
      model = model.empty() ? set->name(0) : model;
      max_w = max_w > 0 ? max_w : mw_to_w(set->power_limit_constraints_mw(0).max_mw);
    } catch (const Error& e) {
      throw ConfigError(fmt::format(
          "zeus tune --server registers the job's GPUs with the service, and this machine's "
          "({}) cannot be read: {}; give --gpus, --gpu-model and --gpu-max-power-w (the job's "
          "GPU count, their model and their maximum power limit in W)",
          locator, e.what()));
    }
  }
  p.number_of_gpus = count;
  p.gpu_model = model;
  p.max_power_w = max_w * count;
}

class ServiceSource final : public TrySource {
 public:
  explicit ServiceSource(const TuneOptions& o)
      : o_(o), client_(bso::BsoClientOptions{.url = o.server_url}) {
    bso::JobSpecRequest r;
    bso::JobParams& p = r.params;
    p.job_id = o.job_id;
    p.job_id_prefix = o.job_id;
    p.batch_sizes = o.batch_sizes;
    p.default_batch_size = o.default_batch_size;
    p.eta_knob = o.eta;
    p.beta_knob = o.beta;
    p.target_metric = o.target_metric.value_or(0);
    p.higher_is_better_metric = !o.lower_is_better;
    p.max_epochs = o.epochs > 0 ? o.epochs : 100;  // upstream's default
    p.window_size = o.window;
    p.mab_seed = static_cast<int64_t>(o.seed);
    p.policy = optimize::parse_policy_choice(o.policy, o.lean);
    r.policy_given = true;
    fill_gpus(o, p);
    try {
      optimize::bso::validate(p);
    } catch (const optimize::bso::BsoError& e) {
      throw ConfigError(fmt::format("the batch-size service's job '{}': {}", p.job_id, e.what()));
    }
    job_ = client_.register_job(r);
  }

  PlannedTry next() override {
    grant_ = client_.next_trial(job_.job_id);
    const int64_t bs = grant_->key.batch_size;
    if (std::find(o_.batch_sizes.begin(), o_.batch_sizes.end(), bs) == o_.batch_sizes.end()) {
      abandoned();
      throw IoError(
          fmt::format("the batch-size service at {} handed out batch size {}, which is "
                      "not one of --batch-sizes",
                      client_.url(), bs));
    }
    return {.batch_size = bs,
            .cost_threshold = grant_->cost_threshold.value_or(kInf),
            .epoch_cap = static_cast<int>(grant_->epoch_cap.value_or(0)),
            .trial_number = grant_->key.trial_number,
            .stage = fmt::format("service trial {}", grant_->key.trial_number)};
  }

  // One report with the try's totals, as upstream's client's last one; a trial the service
  // would keep open (the command stopped itself: its own early stop, a failure) ends Failed.
  void finished(const TuneTry& t, const contract::TrainResult& r) override {
    const bso::ReportAnswer answer =
        client_.report(job_.job_id, {.trial_number = grant_->key.trial_number,
                                     .batch_size = grant_->key.batch_size,
                                     .time_s = r.time_s,
                                     .energy_j = r.energy_j,
                                     .metric = metric_of(t, r),
                                     .current_epoch = r.num_epochs});
    if (!answer.stop_train) {
      client_.end_trial(grant_->key);
    }
    if (answer.converged != t.reached) {
      logger().warn(
          "zeus tune: the service judged trial {} {} but the command {} the target: check that "
          "the command's target metric is --target-metric ({})",
          grant_->key.trial_number, answer.converged ? "converged" : "not converged",
          t.reached ? "reached" : "did not reach", job_.target_metric);
    }
    grant_.reset();
  }

  void abandoned() override {
    if (!grant_) {
      return;
    }
    try {
      client_.end_trial(grant_->key);
    } catch (const std::exception& e) {
      logger().warn("zeus tune: could not end trial {} at the service ({}); it times out there",
                    grant_->key.trial_number, e.what());
    }
    grant_.reset();
  }

  std::string summary() const override {
    return fmt::format("job '{}' is kept by the batch-size service at {}", job_.job_id,
                       client_.url());
  }

 private:
  // The metric the service judges: the last one the job reported; without one, the target when
  // the job reached it, else a value that does not reach it.
  double metric_of(const TuneTry& t, const contract::TrainResult& r) const {
    for (auto it = r.epochs.rbegin(); it != r.epochs.rend(); ++it) {
      if (it->metric) {
        return *it->metric;
      }
    }
    const double miss = o_.lower_is_better ? std::numeric_limits<double>::max()
                                           : std::numeric_limits<double>::lowest();
    return t.reached ? job_.target_metric : miss;
  }

  const TuneOptions& o_;
  bso::BsoClient client_;
  bso::JobParams job_;
  std::optional<bso::TrialGrant> grant_;
};

}  // namespace

std::unique_ptr<TrySource> local_source(const TuneOptions& options,
                                        const std::vector<TuneTry>& history) {
  return std::make_unique<LocalSource>(options, history);
}

std::unique_ptr<TrySource> service_source(const TuneOptions& options) {
  return std::make_unique<ServiceSource>(options);
}

}  // namespace zeus::tune
