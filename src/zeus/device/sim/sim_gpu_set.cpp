#include "zeus/device/sim/sim_gpu_set.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <thread>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/power.h"
#include "zeus/device/sim/shared_state_file.h"

namespace zeus::device::sim {

namespace {

struct ModelInfo {
  std::string_view model;
  std::string_view name;
  double idle_power_w;  // typical idle draw; the traces only measure GPUs under load
};

constexpr std::array kModels{
    ModelInfo{"a40", "NVIDIA A40", 30.0},
    ModelInfo{"p100", "Tesla P100-PCIE-16GB", 30.0},
    ModelInfo{"rtx6000", "Quadro RTX 6000", 20.0},
    ModelInfo{"v100", "Tesla V100-PCIE-32GB", 40.0},
};

const ModelInfo& model_info(std::string_view model) {
  for (const auto& m : kModels) {
    if (m.model == model) {
      return m;
    }
  }
  throw ConfigError(
      fmt::format("unknown simulated GPU '{}'; choose a40, p100, rtx6000 or v100", model));
}

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

trace::PowerTrace load_trace(const SimGpuSetOptions& options) {
  return options.trace_path.empty() ? trace::PowerTrace::load_gpu(options.gpu_model)
                                    : trace::PowerTrace::load(options.trace_path);
}

int64_t pick_batch_size(const SimGpuSetOptions& options) {
  return options.batch_size.value_or(trace::find_workload(options.workload).default_batch_size);
}

}  // namespace

SimGpuSetOptions parse_sim_spec(std::string_view spec) {
  const auto bad = [&](std::string_view why) {
    return ConfigError(fmt::format(
        "device '{}': {}; expected sim:<gpu>[:<workload>[:<batch size>]][@<state file>], e.g. "
        "sim:v100 or sim:a40:librispeech:192",
        spec, why));
  };
  if (spec.rfind("sim:", 0) != 0) {
    throw bad("does not start with 'sim:'");
  }
  SimGpuSetOptions options;
  std::string_view body = spec.substr(4);
  if (const size_t at = body.find('@'); at != std::string_view::npos) {
    options.state_path = std::string(body.substr(at + 1));
    if (options.state_path.empty()) {
      throw bad("empty state file after '@'");
    }
    body = body.substr(0, at);
  } else if (auto env = get_env(kEnvSimState)) {
    options.state_path = *env;
  }
  const std::vector<std::string> parts = split(body, ':');
  if (parts[0].empty()) {
    throw bad("no GPU model after 'sim:'");
  }
  if (parts.size() > 3) {
    throw bad(
        fmt::format("{} fields where at most 3 (gpu, workload, batch size) go", parts.size()));
  }
  // The model's and workload's own messages list what exists; the grammar goes with them.
  try {
    options.gpu_model = std::string(parts[0]);
    model_info(options.gpu_model);
    if (parts.size() >= 2) {
      options.workload = std::string(parts[1]);
      trace::find_workload(options.workload);
    }
  } catch (const ConfigError& e) {
    throw bad(e.what());
  }
  if (parts.size() == 3) {
    const auto bs = parse_number<int64_t>(parts[2]);
    if (!bs || *bs <= 0) {
      throw bad(fmt::format("batch size '{}' is not a positive integer", parts[2]));
    }
    options.batch_size = *bs;
  }
  options.gpu_count_from_state = !get_env(kEnvSimGpus) && !options.state_path.empty();
  const std::string gpus = get_env_or_default(kEnvSimGpus);
  const auto count = parse_number<int>(gpus);
  if (!count || *count < 1 || *count > detail::kMaxGpus) {
    throw ConfigError(fmt::format("{}='{}' must be an integer in 1-{}", kEnvSimGpus.name, gpus,
                                  detail::kMaxGpus));
  }
  options.gpu_count = *count;
  return options;
}

SimGpuSet::SimGpuSet(SimGpuSetOptions options) : SimGpuSet(options, load_trace(options)) {}

// The trace is read once: the workload's profile and the GPU's settable range both come from it.
SimGpuSet::SimGpuSet(SimGpuSetOptions options, const trace::PowerTrace& trace)
    : options_(std::move(options)),
      profile_(trace.profile(options_.workload, pick_batch_size(options_))),
      batch_size_(pick_batch_size(options_)) {
  const ModelInfo& info = model_info(options_.gpu_model);
  if (options_.gpu_count < 1 || options_.gpu_count > detail::kMaxGpus) {
    throw ConfigError(fmt::format("simulated GPU count {} must be in 1-{}", options_.gpu_count,
                                  detail::kMaxGpus));
  }
  const trace::Workload& workload = trace::find_workload(options_.workload);
  iterations_per_epoch_ = (workload.train_samples + batch_size_ - 1) / batch_size_;
  range_mw_ = {w_to_mw(static_cast<double>(trace.min_power_limit_w())),
               w_to_mw(static_cast<double>(trace.max_power_limit_w()))};
  idle_power_w_ = info.idle_power_w;
  display_name_ = std::string(info.name);
  const std::string model_key =
      fmt::format("{}:{}:{}", options_.gpu_model, options_.workload, batch_size_);
  shared_ = std::make_unique<SharedStateFile>(options_.state_path, [&](detail::SharedState& state,
                                                                       bool fresh) {
    if (!fresh) {
      if (options_.gpu_count_from_state && state.magic == detail::kMagic && state.gpu_count >= 1 &&
          state.gpu_count <= static_cast<uint32_t>(detail::kMaxGpus)) {
        options_.gpu_count = static_cast<int>(state.gpu_count);
      }
      const bool same = state.magic == detail::kMagic && state.version == detail::kVersion &&
                        state.gpu_count == static_cast<uint32_t>(options_.gpu_count) &&
                        std::string_view(state.model.data()) == model_key;
      if (!same) {
        const std::string theirs = state.magic == detail::kMagic
                                       ? fmt::format("{} x {}", state.gpu_count, state.model.data())
                                       : std::string("something else");
        throw ConfigError(fmt::format(
            "simulated GPU state file '{}' holds {}, but this process asks for {} x {}; use "
            "the same sim: spec and {} in every process of a node, or remove the file",
            options_.state_path.string(), theirs, options_.gpu_count, model_key, kEnvSimGpus.name));
      }
      return;
    }
    state.magic = detail::kMagic;
    state.version = detail::kVersion;
    state.gpu_count = static_cast<uint32_t>(options_.gpu_count);
    ZEUS_ASSERT(model_key.size() < state.model.size(), "model key '{}' too long", model_key);
    std::copy(model_key.begin(), model_key.end(), state.model.begin());
    const int64_t now = options_.clock == SimClock::kReal ? monotonic_ns() : 0;
    for (int i = 0; i < options_.gpu_count; ++i) {
      detail::SharedGpu& g = state.gpus[static_cast<size_t>(i)];
      g.power_limit_mw = range_mw_.max_mw;
      g.clock_ns = now;
      g.busy = options_.start_busy ? 1 : 0;
      g.energy_mj = 0;
    }
  });
  state_ = &shared_->state();
}

SimGpuSet::~SimGpuSet() = default;

std::string SimGpuSet::locator() const {
  std::string out = fmt::format("sim:{}:{}:{}", options_.gpu_model, options_.workload, batch_size_);
  if (!options_.state_path.empty()) {
    out += fmt::format("@{}", options_.state_path.string());  // not "@" + s: GCC 12 -O3 bug 105329
  }
  return out;
}

std::string SimGpuSet::name(int gpu) const {
  check_index(gpu);
  return display_name_ + " (simulated)";
}

std::string SimGpuSet::uuid(int gpu) const {
  check_index(gpu);
  return fmt::format("SIM-{}-{}", options_.gpu_model, gpu);
}

std::string SimGpuSet::describe(int gpu) const {
  check_index(gpu);
  return fmt::format("trace {} {} at batch size {} ({} iterations/epoch), {} clock",
                     options_.gpu_model, options_.workload, batch_size_, iterations_per_epoch_,
                     options_.clock == SimClock::kReal ? "real" : "virtual");
}

double SimGpuSet::power_w_locked(int gpu) const {
  const detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
  if (g.busy == 0) {
    return idle_power_w_;
  }
  return profile_.average_power_w(mw_to_w(g.power_limit_mw));
}

std::chrono::nanoseconds SimGpuSet::iteration_time_locked(int gpu) const {
  const double limit_w = mw_to_w(state_->gpus[static_cast<size_t>(gpu)].power_limit_mw);
  const double seconds =
      profile_.time_per_epoch_s(limit_w) / static_cast<double>(iterations_per_epoch_);
  return std::chrono::nanoseconds{static_cast<int64_t>(seconds * 1e9)};
}

void SimGpuSet::settle(int gpu, int64_t now_ns) {
  detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
  if (options_.clock == SimClock::kReal && now_ns > g.clock_ns) {
    g.energy_mj +=
        zeus::energy_mj(power_w_locked(gpu), std::chrono::nanoseconds(now_ns - g.clock_ns));
    g.clock_ns = now_ns;
  }
}

int64_t SimGpuSet::power_mw(int gpu) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  return w_to_mw(power_w_locked(gpu));
}

std::optional<int64_t> SimGpuSet::energy_mj(int gpu) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  settle(gpu, monotonic_ns());
  return static_cast<int64_t>(state_->gpus[static_cast<size_t>(gpu)].energy_mj);
}

int64_t SimGpuSet::power_limit_mw(int gpu) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  return state_->gpus[static_cast<size_t>(gpu)].power_limit_mw;
}

PowerLimitRange SimGpuSet::power_limit_constraints_mw(int gpu) {
  check_index(gpu);
  return range_mw_;
}

int64_t SimGpuSet::default_power_limit_mw(int gpu) {
  check_index(gpu);
  return range_mw_.max_mw;
}

void SimGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  check_index(gpu);
  check_limit(gpu, limit_mw, range_mw_);
  SharedStateFile::Lock lock(*shared_);
  settle(gpu, monotonic_ns());
  state_->gpus[static_cast<size_t>(gpu)].power_limit_mw = limit_mw;
}

std::chrono::nanoseconds SimGpuSet::iteration_time(int gpu) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  return iteration_time_locked(gpu);
}

void SimGpuSet::set_busy(int gpu, bool busy) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  settle(gpu, monotonic_ns());
  state_->gpus[static_cast<size_t>(gpu)].busy = busy ? 1 : 0;
}

std::chrono::nanoseconds SimGpuSet::run_iterations(int gpu, int64_t n) {
  check_index(gpu);
  ZEUS_ASSERT(n >= 0, "negative iteration count {}", n);
  std::chrono::nanoseconds total{0};
  bool was_busy = false;
  {
    SharedStateFile::Lock lock(*shared_);
    settle(gpu, monotonic_ns());
    was_busy = state_->gpus[static_cast<size_t>(gpu)].busy != 0;
    state_->gpus[static_cast<size_t>(gpu)].busy = 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::chrono::nanoseconds step{0};
    {
      SharedStateFile::Lock lock(*shared_);
      step = iteration_time_locked(gpu);
      if (options_.clock == SimClock::kVirtual) {
        detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
        g.energy_mj += zeus::energy_mj(power_w_locked(gpu), step);
        g.clock_ns += step.count();
      }
    }
    if (options_.clock == SimClock::kReal) {
      std::this_thread::sleep_for(step);
    }
    total += step;
  }
  SharedStateFile::Lock lock(*shared_);
  settle(gpu, monotonic_ns());
  state_->gpus[static_cast<size_t>(gpu)].busy = was_busy ? 1 : 0;
  return total;
}

void SimGpuSet::idle(int gpu, std::chrono::nanoseconds d) {
  check_index(gpu);
  if (options_.clock == SimClock::kReal) {
    set_busy(gpu, false);
    std::this_thread::sleep_for(d);
    return;
  }
  SharedStateFile::Lock lock(*shared_);
  detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
  g.busy = 0;
  g.energy_mj += zeus::energy_mj(idle_power_w_, d);
  g.clock_ns += d.count();
}

std::chrono::nanoseconds SimGpuSet::now(int gpu) {
  check_index(gpu);
  if (options_.clock == SimClock::kReal) {
    return std::chrono::nanoseconds{monotonic_ns()};
  }
  SharedStateFile::Lock lock(*shared_);
  return std::chrono::nanoseconds{state_->gpus[static_cast<size_t>(gpu)].clock_ns};
}

}  // namespace zeus::device::sim
