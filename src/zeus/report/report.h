// `zeus report DIR`: what a log directory holds (train results, power profiles, per-GPU power
// logs, a `zeus tune` history), as a self-contained HTML page with inline SVG plots, Markdown or
// JSON. Reads only; the caller writes report.html atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "zeus/contract/train_result.h"
#include "zeus/optimize/power_profile.h"
#include "zeus/tune/tuner.h"

namespace zeus::report {

// One `bs{B}+e{epoch}+gpu{i}.power.log`: (UTC ns since the Unix epoch, W) per sample.
struct PowerLog {
  std::filesystem::path path;
  int64_t batch_size = 0;
  int epoch = 0;
  int gpu = 0;
  std::vector<std::pair<int64_t, double>> samples;
};

struct RunData {
  std::filesystem::path dir;
  std::vector<std::pair<std::filesystem::path, contract::TrainResult>> results;  // by file name
  std::vector<std::pair<std::filesystem::path, optimize::PowerProfile>> profiles;
  std::vector<PowerLog> power_logs;
  std::vector<tune::TuneTry> tune_tries;
};

// Throws ConfigError naming the directory when it is missing or holds none of zeus-cpp's files,
// and naming the file when one is corrupt.
RunData load_run(const std::filesystem::path& dir);

std::string to_html(const RunData& run);
std::string to_markdown(const RunData& run);
std::string to_json(const RunData& run);

}  // namespace zeus::report
