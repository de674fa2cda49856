// What the examples share: zeus::DataLoader's command-line flags, and starting the same
// training function under every launch method (zeus run / torchrun's environment, the legacy
// --local_rank argument, --spawn N, Slurm). Exit codes: 0 target reached (or a clean stop on
// the cost threshold), 3 target not reached, 2 bad input, 1 any other failure.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "zeus/cluster/env.h"
#include "zeus/common/errors.h"
#include "zeus/dist/context.h"
#include "zeus/dist/spawn.h"
#include "zeus/job/job_options.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::examples {

// The loader's options as flags; unset ones take the ZEUS_* variables, then the defaults.
struct JobFlags {
  std::string device;
  bool observer = false;

  void add(CLI::App& app, job::JobOptions& job) {
    app.add_option("--device", device, "GPUs to optimize: auto, nvml or sim:<gpu> (ZEUS_DEVICE)");
    app.add_option("--log-dir", job.log_dir, "Profiles, results, power logs (ZEUS_LOG_DIR)");
    app.add_option("--job-id", job.job_id, "Result file prefix (ZEUS_JOB_ID)");
    app.add_option("--eta", job.eta, "Energy vs time weight in [0, 1] (ZEUS_ETA_KNOB)");
    app.add_option("--cost-threshold", job.cost_threshold,
                   "Stop when the next epoch would reach this cost (ZEUS_COST_THRESH)");
    app.add_flag("--observer", observer,
                 "Profile and report, but train at the maximum limit (ZEUS_USE_OPTIMAL_PL=false)");
  }

  void apply(job::JobOptions& job) const {
    if (!device.empty()) {
      job.device = device;
    }
    if (observer) {
      job.observer_mode = true;
    }
  }
};

// Runs `loop` (the epochs; it returns the last all-reduced accuracy) and turns its end into the
// exit code, printing the outcome on the master: 0 when the target was reached, or when every
// rank stopped together on the cost threshold (the master wrote the result); 3 when not reached.
inline int finish_training(dist::Context& ctx, const char* metric, double target,
                           const std::function<double()>& loop) {
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
  return accuracy >= target ? 0 : 3;
}

// Parses argv with `app` (after taking the legacy --local_rank out), calls `after_parse`, then
// runs `train` in this process (zeus::dist::init()) or in `spawn` processes (--spawn N).
inline int run_example(const char* name, int argc, char** argv, CLI::App& app, const int& spawn,
                       const std::function<void()>& after_parse,
                       const std::function<int(dist::Context&)>& train) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    dist::InitOptions init;
    init.env.legacy_local_rank = cluster::take_local_rank_arg(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    after_parse();
    if (spawn > 0) {
      return dist::spawn({.nprocs = spawn}, [&](dist::Context& ctx) {
        if (train(ctx) != 0) {
          throw Error("target not reached");
        }
      });
    }
    auto ctx = dist::init(init);
    return train(*ctx);
  } catch (const CLI::ParseError& e) {
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
