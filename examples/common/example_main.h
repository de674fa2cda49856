// What the examples share: zeus::DataLoader's command-line flags, and starting the same
// training function under every launch method (zeus run / torchrun's environment, the legacy
// --local_rank argument, --spawn N, Slurm). Exit codes: 0 training ended normally (the target
// reached, or not within --epochs, or a clean stop on the cost threshold: the last line and the
// train result say which), 3 target not reached with --fail-if-not-reached, 2 bad input, 1 any
// other failure.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "zeus/cluster/env.h"
#include "zeus/common/errors.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/spawn.h"
#include "zeus/job/job_options.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::examples {

// What every example trains with, as flags; each example sets its own defaults and adds its
// own options. The loader's energy options left unset take the ZEUS_* variables, then the
// defaults.
struct TrainingOptions {
  int epochs = 3;           // max_epochs of the train loader
  int64_t batch_size = 64;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  double target_accuracy = 0.88;
  int workers = 0;  // loader threads per rank
  int threads = 1;  // intra-op threads per rank
  uint64_t seed = 1;
  int spawn = 0;  // > 0: start that many workers from this process
  job::JobOptions job;
  std::string device;                // --device, into job.device when given
  bool observer = false;             // --observer, into job.observer_mode when given
  bool measure_only = false;         // --measure-only, into job.measure_only when given
  bool fail_if_not_reached = false;  // --fail-if-not-reached: exit 3 when the target was missed
  std::string device_type = "auto";  // --device-type: where the model trains
};

inline void add_training_flags(CLI::App& app, TrainingOptions& o) {
  // The last of a repeated flag wins, as with argparse: a job script's defaults can be
  // overridden by arguments appended after them (sbatch train.sbatch --epochs 1).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--epochs", o.epochs, "At most this many epochs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.lr)->capture_default_str();
  app.add_option("--target-accuracy", o.target_accuracy)->capture_default_str();
  app.add_option("--workers", o.workers, "Loader threads per rank (batches made ahead)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads per rank")->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--spawn", o.spawn, "Start N workers from this process");
  app.add_option("--device", o.device, "GPUs to optimize: auto, nvml or sim:<gpu> (ZEUS_DEVICE)");
  app.add_option("--log-dir", o.job.log_dir, "Profiles, results, power logs (ZEUS_LOG_DIR)");
  app.add_option("--job-id", o.job.job_id, "Result file prefix (ZEUS_JOB_ID)");
  app.add_option("--eta", o.job.eta, "Energy vs time weight in [0, 1] (ZEUS_ETA_KNOB)");
  app.add_option("--cost-threshold", o.job.cost_threshold,
                 "Stop when the next epoch would reach this cost (ZEUS_COST_THRESH)");
  app.add_flag("--observer", o.observer,
               "Profile and report, but train at the maximum limit (ZEUS_USE_OPTIMAL_PL=false)");
  app.add_flag("--fail-if-not-reached", o.fail_if_not_reached,
               "Exit with code 3 when the target accuracy was not reached (default 0: a run that "
               "ends at --epochs is a normal outcome, as for a scheduler's job)");
  app.add_flag("--measure-only", o.measure_only,
               "Never change a power limit: measure each epoch at the GPUs' own limit "
               "(ZEUS_MEASURE_ONLY=true; for shared GPUs and processes without root)");
  app.add_option("--device-type", o.device_type,
                 "Where each rank trains: auto (cuda:<local rank> when there is a GPU), cuda or "
                 "cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}, CLI::ignore_case))
      ->capture_default_str();
}

// Runs `loop` (the epochs; it returns the last all-reduced accuracy) and turns its end into the
// exit code, printing the outcome on the master: 0 when training ended normally (every rank
// stopped together on the cost threshold included: the master wrote the result); 3 when the
// target was not reached and `fail_if_not_reached`.
inline int finish_training(distributed::Context& ctx, const char* metric, double target,
                           const std::function<double()>& loop, bool fail_if_not_reached = false) {
  double accuracy = 0;
  try {
    accuracy = loop();
  } catch (const optimize::CostThresholdExceeded& e) {
    if (ctx.is_master()) {
      std::printf("stopped early: %s\n", e.what());
    }
    return 0;
  }
  if (ctx.is_master()) {
    std::printf("final %s %.4f (target %.2f: %s) on %d rank(s)\n", metric, accuracy, target,
                accuracy >= target ? "reached" : "not reached", ctx.world_size());
  }
  return accuracy >= target || !fail_if_not_reached ? 0 : 3;
}

// Parses argv with `app` (after taking the legacy --local_rank out) into `o`, then runs `train`
// in this process (zeus::distributed::init()) or in o.spawn processes (--spawn N).
inline int run_example(const char* name, int argc, char** argv, CLI::App& app, TrainingOptions& o,
                       const std::function<int(distributed::Context&)>& train) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    distributed::InitOptions init;
    init.env.legacy_local_rank = cluster::take_local_rank_arg(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    if (!o.device.empty()) {
      o.job.device = o.device;
    }
    if (o.observer) {
      o.job.observer_mode = true;
    }
    if (o.measure_only) {
      o.job.measure_only = true;
    }
    init.device = distributed::parse_device_type(o.device_type, "--device-type");
    if (o.spawn > 0) {
      return distributed::spawn({.nprocs = o.spawn, .init = init}, [&](distributed::Context& ctx) {
        if (train(ctx) != 0) {
          throw Error("target not reached (--fail-if-not-reached)");
        }
      });
    }
    auto ctx = distributed::init(init);
    return train(*ctx);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      return app.exit(e);  // --help
    }
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 2;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace zeus::examples
