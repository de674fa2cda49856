// Helpers of the zeus::DataLoader end-to-end suites (loader_test.cpp, loader_journal_test.cpp):
// a 2-rank job of support/loader_worker.cpp under `zeus run`, its environment, and what the
// profiler should find on the simulated V100s.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus {
namespace fs = std::filesystem;

// 800 samples on 2 ranks in batches of 4: 100 steps per rank and epoch, enough for 7 limits
// of 2 + 5 iterations in the first epoch.
inline const std::vector<std::string> kWorker{ZEUS_LOADER_WORKER_PATH, "--samples", "800",
                                              "--batch-size", "4"};
constexpr int64_t kGlobalBatch = 8;

struct Job {
  test::ProcessResult result;
  std::string output;  // stdout and stderr, interleaved
};

inline Job run_job(const std::map<std::string, std::string>& env,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& launcher = {"--nproc-per-node", "2",
                                                               "--standalone"}) {
  std::string cmd = fmt::format("{} run", ZEUS_CLI_PATH);
  for (const auto& a : launcher)
    cmd += " " + a;
  for (const auto& a : kWorker)
    cmd += " " + a;
  for (const auto& a : args)
    cmd += " '" + a + "'";
  test::Child child({"/bin/sh", "-c", cmd + " 2>&1"}, env);
  Job job;
  job.result = child.wait();
  job.output = job.result.out;
  return job;
}

inline std::map<std::string, std::string> sim_env(const fs::path& log_dir) {
  return {{"ZEUS_DEVICE", "sim:v100"},   {"ZEUS_LOG_DIR", log_dir.string()},
          {"ZEUS_TARGET_METRIC", "0.5"}, {"ZEUS_PROFILE_PARAMS", "2,5"},
          {"ZEUS_ETA_KNOB", "0.5"},      {"ZEUS_COST_THRESH", ""},
          {"ZEUS_USE_OPTIMAL_PL", ""},   {"ZEUS_JOB_ID", ""},
          {"ZEUS_MEASURE_ONLY", ""}};
}

inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

inline std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// What the profiler should find on 2 simulated V100s: per candidate limit, the trace row's
// iterations/s and twice its power; and the limit the cost formula picks from them.
struct Expected {
  PowerLimitRange range;
  std::vector<int64_t> candidates;
  std::vector<optimize::LimitMeasurement> measurements;
  int64_t optimal_mw = 0;
};

inline Expected expected_from_trace(double eta) {
  device::sim::SimGpuSet gpu({.gpu_model = "v100", .clock = device::SimClock::kVirtual});
  Expected e;
  e.range = gpu.power_limit_constraints_mw(0);
  e.candidates = optimize::candidate_limits_mw(e.range, 25'000);
  gpu.set_busy(0, true);
  for (int64_t mw : e.candidates) {
    gpu.set_power_limit_mw(0, mw);
    const double seconds = std::chrono::duration<double>(gpu.iteration_time(0)).count();
    e.measurements.push_back(
        {mw, 1.0 / seconds, 2.0 * static_cast<double>(gpu.power_mw(0)) / 1000});
  }
  const optimize::CostModel cost(eta, 2.0 * static_cast<double>(e.range.max_mw) / 1000.0);
  e.optimal_mw = optimize::select_power_limit(e.measurements, cost, {});
  return e;
}

inline nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(read_file(path));
}

}  // namespace zeus
