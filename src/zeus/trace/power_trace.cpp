#include "zeus/trace/power_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "zeus/common/atomic_file.h"
#include "zeus/common/csv.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/config.h"

namespace zeus::trace {
namespace {

// The jobs of the Zeus paper (spec-optimizer.md): optimizer, b0, target and epoch limit; and the
// training-set sizes of the public datasets (ImageNet-1k train, LibriSpeech 960 h, SQuAD v1.1
// train, MovieLens-1M leave-one-out train, Sentiment140 train, CIFAR-100 train).
constexpr std::array kWorkloads{
    Workload{"cifar100", "shufflenetv2", "adadelta", 1024, 50'000, 0.6, 100},
    Workload{"imagenet", "resnet50", "adadelta", 256, 1'281'167, 0.65, 100},
    Workload{"librispeech", "deepspeech2", "adamw", 192, 281'241, 40.0, 16},
    Workload{"movielens-1m", "ncf", "adam", 1024, 994'169, 0.41, 100},
    Workload{"sentiment140", "bert_base_uncased", "adamw", 128, 1'600'000, 0.84, 10},
    Workload{"squad", "bert_base_uncased", "adamw", 32, 87'599, 84.0, 6},
};

constexpr std::array<std::string_view, 4> kGpuModels{"a40", "p100", "rtx6000", "v100"};

constexpr std::array kGpuFacts{
    GpuModelFacts{"a40", "NVIDIA A40", 30.0},
    GpuModelFacts{"p100", "Tesla P100-PCIE-16GB", 30.0},
    GpuModelFacts{"rtx6000", "Quadro RTX 6000", 20.0},
    GpuModelFacts{"v100", "Tesla V100-PCIE-32GB", 40.0},
};

}  // namespace

const GpuModelFacts& gpu_model_facts(std::string_view model) {
  for (const auto& m : kGpuFacts) {
    if (m.model == model) {
      return m;
    }
  }
  throw ConfigError(
      fmt::format("unknown simulated GPU '{}'; choose a40, p100, rtx6000 or v100", model));
}

std::vector<GpuMixEntry> parse_gpu_mix(std::string_view text) {
  std::vector<GpuMixEntry> mix;
  for (const std::string& item : split(text, ',')) {
    const std::string_view entry = item;
    const size_t star = entry.find('*');
    GpuMixEntry gpu{std::string(entry.substr(0, star)), 1.0};
    if (gpu.model.empty()) {
      throw ConfigError(fmt::format("GPU entry '{}' names no model", entry));
    }
    gpu_model_facts(gpu.model);
    if (star != std::string_view::npos) {
      const auto s = parse_number<double>(entry.substr(star + 1));
      if (!s || !(*s > 0) || !std::isfinite(*s)) {
        throw ConfigError(
            fmt::format("slowdown '{}' of GPU entry '{}' is not a number > 0 (1.15: 15% slower)",
                        entry.substr(star + 1), entry));
      }
      gpu.slowdown = *s;
    }
    mix.push_back(std::move(gpu));
  }
  return mix;
}

std::string format_gpu_mix(std::span<const GpuMixEntry> mix) {
  std::string out;
  for (const auto& e : mix) {
    out += out.empty() ? "" : ",";
    out += e.slowdown == 1.0 ? e.model : fmt::format("{}*{}", e.model, e.slowdown);
  }
  return out;
}

std::span<const Workload> all_workloads() {
  return kWorkloads;
}
std::span<const std::string_view> trace_gpu_models() {
  return kGpuModels;
}

const Workload& find_workload(std::string_view dataset) {
  for (const auto& w : kWorkloads) {
    if (w.dataset == dataset) {
      return w;
    }
  }
  std::vector<std::string_view> names;
  for (const auto& w : kWorkloads) {
    names.push_back(w.dataset);
  }
  throw ConfigError(
      fmt::format("unknown workload '{}'; the traces have: {}", dataset, fmt::join(names, ", ")));
}

std::filesystem::path trace_dir() {
  std::vector<std::filesystem::path> candidates;
  if (auto env = get_env(kEnvTraceDir)) {
    candidates.emplace_back(*env);
  } else {
    // Installed: beside the program (PREFIX/bin/zeus -> PREFIX/share/zeus/zeus-traces), so a
    // prefix moved elsewhere still finds them; then this checkout's; then the prefix it was
    // configured with.
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.push_back(exe.parent_path().parent_path() / "share" / "zeus" / "zeus-traces");
    }
    candidates.emplace_back(ZEUS_SOURCE_TRACE_DIR);
    candidates.emplace_back(ZEUS_INSTALL_TRACE_DIR);
  }
  for (const auto& dir : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(dir / "summary_power_v100.csv", ec)) {
      return dir;
    }
  }
  std::vector<std::string> shown;
  for (const auto& dir : candidates) {
    shown.push_back(dir.string());
  }
  throw IoError(fmt::format(
      "cannot find the Zeus traces (summary_power_<gpu>.csv) in: {}; set {} to their directory",
      fmt::join(shown, ", "), kEnvTraceDir.name));
}

PowerProfile::PowerProfile(std::vector<PowerTraceRow> points) : points_(std::move(points)) {
  ZEUS_ASSERT(!points_.empty(), "a power profile needs at least one point");
  ZEUS_ASSERT(std::is_sorted(
                  points_.begin(), points_.end(),
                  [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; }),
              "profile points must be sorted by power limit");
}

template <typename F>
double PowerProfile::interpolate(double power_limit_w, F field) const {
  if (power_limit_w <= static_cast<double>(points_.front().power_limit_w)) {
    return field(points_.front());
  }
  if (power_limit_w >= static_cast<double>(points_.back().power_limit_w)) {
    return field(points_.back());
  }
  const auto hi = std::lower_bound(points_.begin(), points_.end(), power_limit_w,
                                   [](const PowerTraceRow& row, double pl) {
                                     return static_cast<double>(row.power_limit_w) < pl;
                                   });
  const auto lo = hi - 1;
  const double x0 = static_cast<double>(lo->power_limit_w);
  const double x1 = static_cast<double>(hi->power_limit_w);
  const double t = (power_limit_w - x0) / (x1 - x0);
  return field(*lo) + t * (field(*hi) - field(*lo));
}

double PowerProfile::time_per_epoch_s(double power_limit_w) const {
  return interpolate(power_limit_w, [](const PowerTraceRow& r) { return r.time_per_epoch_s; });
}

double PowerProfile::average_power_w(double power_limit_w) const {
  return interpolate(power_limit_w, [](const PowerTraceRow& r) { return r.average_power_w; });
}

PowerTrace PowerTrace::load(const std::filesystem::path& csv_path) {
  return parse(read_file(csv_path), csv_path.string());
}

PowerTrace PowerTrace::parse(std::string_view text, std::string_view source) {
  const CsvTable table = CsvTable::parse(text, source);
  const size_t c_dataset = table.column("dataset");
  const size_t c_network = table.column("network");
  const size_t c_bs = table.column("batch_size");
  const size_t c_opt = table.column("optimizer");
  const size_t c_pl = table.column("power_limit");
  const size_t c_time = table.column("time_per_epoch");
  const size_t c_power = table.column("average_power");
  PowerTrace trace;
  trace.source_ = std::string(source);
  for (size_t i = 0; i < table.rows().size(); ++i) {
    const auto& r = table.rows()[i];
    PowerTraceRow row{r[c_dataset],
                      r[c_network],
                      r[c_opt],
                      table.as_int(i, c_bs),
                      table.as_int(i, c_pl),
                      table.as_double(i, c_time),
                      table.as_double(i, c_power)};
    // Bounds far beyond any real GPU keep later unit conversions (W -> mW) from overflowing.
    if (row.batch_size <= 0 || row.batch_size > 1'000'000'000 || row.power_limit_w <= 0 ||
        row.power_limit_w > 100'000 || row.time_per_epoch_s <= 0 || row.time_per_epoch_s > 1e9 ||
        row.average_power_w <= 0 || row.average_power_w > 1e5) {
      throw ConfigError(fmt::format(
          "{}: row {}: batch size {}, power limit {} W, time {} s or power {} W is out of range",
          trace.source_, i + 2, row.batch_size, row.power_limit_w, row.time_per_epoch_s,
          row.average_power_w));
    }
    trace.rows_.push_back(std::move(row));
  }
  if (trace.rows_.empty()) {
    throw ConfigError(fmt::format("{}: no measurements", trace.source_));
  }
  return trace;
}

PowerTrace PowerTrace::load_gpu(std::string_view gpu_model) {
  if (std::find(kGpuModels.begin(), kGpuModels.end(), gpu_model) == kGpuModels.end()) {
    throw ConfigError(fmt::format("no traces for GPU model '{}'; available: {}", gpu_model,
                                  fmt::join(kGpuModels, ", ")));
  }
  return load(trace_dir() / fmt::format("summary_power_{}.csv", gpu_model));
}

int64_t PowerTrace::min_power_limit_w() const {
  return std::min_element(
             rows_.begin(), rows_.end(),
             [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; })
      ->power_limit_w;
}

int64_t PowerTrace::max_power_limit_w() const {
  return std::max_element(
             rows_.begin(), rows_.end(),
             [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; })
      ->power_limit_w;
}

std::vector<int64_t> PowerTrace::batch_sizes(std::string_view dataset) const {
  std::set<int64_t> sizes;
  for (const auto& row : rows_) {
    if (row.dataset == dataset) {
      sizes.insert(row.batch_size);
    }
  }
  return {sizes.begin(), sizes.end()};
}

PowerProfile PowerTrace::profile(std::string_view dataset, int64_t batch_size) const {
  const Workload& workload = find_workload(dataset);
  std::vector<PowerTraceRow> points;
  for (const auto& row : rows_) {
    if (row.dataset == dataset && row.batch_size == batch_size &&
        row.optimizer == workload.optimizer) {
      points.push_back(row);
    }
  }
  if (points.empty()) {
    throw ConfigError(fmt::format("{}: no measurements for {} at batch size {}; measured: {}",
                                  source_, dataset, batch_size,
                                  fmt::join(batch_sizes(dataset), ", ")));
  }
  std::sort(points.begin(), points.end(),
            [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; });
  return PowerProfile(std::move(points));
}

}  // namespace zeus::trace
