// Where zeus tune's tries come from: the local BatchSizeOptimizer (its history in the log dir),
// or the batch-size service (`--server`), which decides for every tuner of the job on whatever
// machine, so that recurrences submitted from a cluster's nodes share one optimizer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/contract/train_result.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/tune/tuner.h"

namespace zeus::tune {

struct PlannedTry {
  int64_t batch_size = 0;
  double cost_threshold = 0;  // infinity: none
  int epoch_cap = 0;          // 0: none
  int64_t trial_number = 0;   // the service's; 0 locally
  std::string stage;          // for the table: "pruning 1", "thompson", "service trial 4"
};

// Contract: next(), then exactly one of finished() (the try ran and is recorded) or
// abandoned() (it was stopped by a signal: not recorded, run again on resume).
class TrySource {
 public:
  virtual ~TrySource() = default;
  virtual PlannedTry next() = 0;
  // `t` as recorded (cost, reached, epochs), `result` the command's train result.
  virtual void finished(const TuneTry& t, const contract::TrainResult& result) = 0;
  virtual void abandoned() = 0;
  // The closing line's end: "batch sizes left: 32,64", or where the service holds the job.
  virtual std::string summary() const = 0;
};

// The local optimizer's options from zeus tune's (it also checks them).
optimize::BatchSizeOptimizerOptions optimizer_options(const TuneOptions& options);

// The local optimizer, with `history` (the log dir's tries) replayed.
std::unique_ptr<TrySource> local_source(const TuneOptions& options,
                                        const std::vector<TuneTry>& history);
// The service at options.server_url; registers options.job_id (GPUs from the options, else
// found on this machine). Throws ConfigError/IoError as bso::BsoClient does.
std::unique_ptr<TrySource> service_source(const TuneOptions& options);

}  // namespace zeus::tune
