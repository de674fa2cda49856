// A train job's trial at the batch-size service (Note [service trial]).
//
// Note [service trial]: with JobOptions::batch_size_service set, the global master registers the
// job (Zeus 0.16's JobSpecFromClient: the job's id, knobs and batch sizes, and its GPUs: the
// max power limit times the world's GPUs, the same MAXPOWER as the job's own cost) and takes
// the next trial, before the job loads anything named by the batch size; every rank gets the
// trial's global batch size, the service's cost threshold (beta x the job's best cost, which
// then bounds the job's own forecast early stop) and lean's epoch cap. After each epoch with a
// metric the master reports the totals, as upstream's client does after each evaluation; the
// service may end the trial (converged, over its cost bound, at max_epochs). A job that ends
// otherwise (its own early stop, a failure, an exception) ends the trial (PATCH /trials: Failed),
// as upstream's client does at exit; a killed job's trial is timed out by zeus-cpp's service.
#pragma once

#include <memory>
#include <string>

#include "zeus/bso_client/client.h"
#include "zeus/job/collectives.h"
#include "zeus/job/job_core.h"
#include "zeus/job/job_options.h"
#include "zeus/job/messages.h"

namespace zeus::job {

// The job's GPUs as the service's GpuConfig has them.
struct ServiceGpus {
  double max_power_w = 0;  // the max power limit x the GPUs of the whole job
  int64_t count = 0;
  std::string model;
};

// Global master only. Calls throw what BsoClient throws (IoError, ConfigError, Error).
class BatchSizeTrial {
 public:
  BatchSizeTrial(const ResolvedService& service, const ServiceGpus& gpus);
  ~BatchSizeTrial();  // end()
  BatchSizeTrial(const BatchSizeTrial&) = delete;
  BatchSizeTrial& operator=(const BatchSizeTrial&) = delete;

  const bso::TrialGrant& grant() const { return grant_; }
  const std::string& url() const { return client_->url(); }

  // After an epoch: the job's totals so far (seconds, joules), the epochs run and the metric.
  // A stop_train answer ends the trial.
  bso::ReportAnswer report(int epochs, double time_s, double energy_j, double metric);
  // A trial the service still waits on ends as Failed. Logs what fails; never throws.
  void end() noexcept;
  // Whether the service still waits on the trial's reports.
  bool open() const { return open_; }

 private:
  std::unique_ptr<bso::BsoClient> client_;
  bso::TrialGrant grant_;
  bool open_ = false;
};

// Collective, when options.service is set: the global master registers the job with `gpus` and
// takes a trial (into `trial`); every rank applies the grant to `options` (the batch size, the
// service's cost threshold when lower, lean's epoch cap). A failure is raised on every rank.
void take_service_trial(ResolvedJobOptions& options, Collectives& collectives,
                        const ServiceGpus& gpus, std::unique_ptr<BatchSizeTrial>& trial);

// The global master, after `epochs` epochs whose last one's metric is `metric`: the service
// hears the job's totals (from `core`) and may end the trial. Its stop without convergence (over
// its cost bound) turns a kContinue `decision` into kCostThreshold; its convergence into
// kTargetReached. A service that fails now does not stop training: the job goes on alone (the
// service times the trial out).
void consult_service(BatchSizeTrial& trial, const JobCore& core, int epochs, double metric,
                     DecisionMessage& decision);

}  // namespace zeus::job
