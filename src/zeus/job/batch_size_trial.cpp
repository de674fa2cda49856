#include "zeus/job/batch_size_trial.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::job {

BatchSizeTrial::BatchSizeTrial(const ResolvedService& service, const ServiceGpus& gpus)
    : client_(std::make_unique<bso::BsoClient>(bso::BsoClientOptions{.url = service.url})) {
  bso::JobSpecRequest request{.params = service.params, .policy_given = service.policy_given};
  request.params.max_power_w = gpus.max_power_w;
  request.params.number_of_gpus = gpus.count;
  request.params.gpu_model = gpus.model;
  try {
    optimize::bso::validate(request.params);  // upstream's 422s, said before asking
  } catch (const optimize::bso::BsoError& e) {
    throw ConfigError(
        fmt::format("the batch-size service's job '{}': {}", request.params.job_id, e.what()));
  }
  const bso::JobParams job = client_->register_job(request);
  grant_ = client_->next_trial(job.job_id);
  open_ = true;
  const auto& sizes = job.batch_sizes;
  if (std::find(sizes.begin(), sizes.end(), grant_.key.batch_size) == sizes.end()) {
    end();
    throw IoError(fmt::format(
        "the batch-size service at {} handed job '{}' batch size {}, which is not one of its "
        "batch sizes",
        url(), job.job_id, grant_.key.batch_size));
  }
  logger().info(
      "batch-size service {}: job '{}' trial {} at global batch size {}{}{}", url(), job.job_id,
      grant_.key.trial_number, grant_.key.batch_size,
      grant_.cost_threshold ? fmt::format(", cost threshold {:.1f}", *grant_.cost_threshold) : "",
      grant_.epoch_cap ? fmt::format(", at most {} epochs", *grant_.epoch_cap) : "");
}

BatchSizeTrial::~BatchSizeTrial() {
  end();
}

bso::ReportAnswer BatchSizeTrial::report(int epochs, double time_s, double energy_j,
                                         double metric) {
  const bso::ReportAnswer answer =
      client_->report(grant_.key.job_id, {.trial_number = grant_.key.trial_number,
                                          .batch_size = grant_.key.batch_size,
                                          .time_s = time_s,
                                          .energy_j = energy_j,
                                          .metric = metric,
                                          .current_epoch = epochs});
  if (answer.stop_train) {
    open_ = false;
    logger().info("batch-size service: trial {} of job '{}' ended: {}", grant_.key.trial_number,
                  grant_.key.job_id, answer.message);
  }
  return answer;
}

void BatchSizeTrial::end() noexcept {
  if (!open_) {
    return;
  }
  open_ = false;
  try {
    client_->end_trial(grant_.key);
  } catch (const std::exception& e) {
    logger().warn(
        "batch-size service: could not end trial {} of job '{}' ({}); the service times it out",
        grant_.key.trial_number, grant_.key.job_id, e.what());
  }
}

void take_service_trial(ResolvedJobOptions& o, Collectives& coll, const ServiceGpus& gpus,
                        std::unique_ptr<BatchSizeTrial>& trial) {
  const RankInfo ranks = coll.ranks();
  std::vector<double> g(GrantMessage::kSize, 0.0);
  agree(coll, fmt::format("asking the batch-size service at {}", o.service->url), [&] {
    if (!ranks.is_master()) {
      return;
    }
    trial = std::make_unique<BatchSizeTrial>(*o.service, gpus);
    const bso::TrialGrant& grant = trial->grant();
    g = GrantMessage{grant.key.batch_size, grant.cost_threshold, grant.epoch_cap}.encode();
  });
  coll.broadcast(g, 0);
  const GrantMessage grant = GrantMessage::decode(g);
  if (grant.global_batch_size < 1 || grant.global_batch_size % ranks.world_size != 0) {
    throw ConfigError(fmt::format(
        "the batch-size service handed out global batch size {}, which does not split over {} "
        "ranks",
        grant.global_batch_size, ranks.world_size));
  }
  o.global_batch_size = grant.global_batch_size;
  o.per_rank_batch_size = grant.global_batch_size / ranks.world_size;
  if (grant.cost_threshold) {
    o.cost_threshold = std::min(o.cost_threshold, *grant.cost_threshold);
  }
  if (grant.epoch_cap) {
    o.max_epochs = static_cast<int>(std::min<int64_t>(o.max_epochs, *grant.epoch_cap));
  }
}

void consult_service(BatchSizeTrial& trial, const JobCore& core, int epochs, double metric,
                     DecisionMessage& decision) {
  if (!trial.open()) {
    return;
  }
  const double time_s = core.total_time_s();
  const double energy_j = core.total_energy_j();
  bso::ReportAnswer answer;
  try {
    answer = trial.report(epochs, time_s, energy_j, metric);
  } catch (const std::exception& e) {
    logger().warn("batch-size service: the report of epoch {} failed ({}); training goes on",
                  epochs, e.what());
    return;
  }
  using Code = DecisionMessage::Code;
  if (!answer.stop_train || decision.code != Code::kContinue) {
    return;
  }
  if (answer.converged) {
    decision.code = Code::kTargetReached;
    return;
  }
  // Over the service's bound: the job has spent it already, so the bound the message names is
  // the cost so far.
  const double cost = core.cost().cost(energy_j, time_s);
  decision.code = Code::kCostThreshold;
  decision.forecast.cost_so_far = cost;
  decision.forecast.predicted_cost = cost;
  decision.threshold = cost;
  logger().warn("batch-size service: {}", answer.message);
}

}  // namespace zeus::job
