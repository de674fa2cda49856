#include "zeus/device/sim/sim_gpu_set.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
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

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

trace::PowerTrace load_trace(const SimGpuSetOptions& options, std::string_view model) {
  return options.trace_path.empty() ? trace::PowerTrace::load_gpu(model)
                                    : trace::PowerTrace::load(options.trace_path);
}

int64_t pick_batch_size(const SimGpuSetOptions& options) {
  return options.batch_size.value_or(trace::find_workload(options.workload).default_batch_size);
}

}  // namespace

SimGpuSetOptions parse_sim_spec(std::string_view spec) {
  const auto bad = [&](std::string_view why) {
    return ConfigError(fmt::format(
        "device '{}': {}; expected sim:<gpu>[*<slowdown>][,<gpu>[*<slowdown>]...][:<workload>[:"
        "<batch size>]][@<state file>], e.g. sim:v100, sim:a40:librispeech:192 or "
        "sim:v100,v100*1.2:cifar100:1024",
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
    options.mix = trace::parse_gpu_mix(parts[0]);
    options.gpu_model = options.mix.front().model;
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
  if (options.mix.size() > static_cast<size_t>(detail::kMaxGpus)) {
    throw bad(fmt::format("{} GPUs where at most {} go", options.mix.size(), detail::kMaxGpus));
  }
  if (options.mix.size() > 1) {
    options.gpu_count = static_cast<int>(options.mix.size());
    if (auto gpus = get_env(kEnvSimGpus); gpus && parse_number<int>(*gpus) != options.gpu_count) {
      throw bad(fmt::format("{} GPUs listed, but {}='{}'; unset it or make them agree",
                            options.gpu_count, kEnvSimGpus.name, *gpus));
    }
    return options;
  }
  // One entry: the same GPU, as many as asked for.
  const SimGpuEntry one = options.mix.front();
  options.mix.clear();
  if (one.slowdown != 1.0) {
    options.mix.push_back(one);  // expanded to the count by the set
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

// Each model's trace is read once: the workload's profile and the GPU's settable range both come
// from it.
SimGpuSet::SimGpuSet(SimGpuSetOptions options)
    : options_(std::move(options)), batch_size_(pick_batch_size(options_)) {
  const trace::Workload& workload = trace::find_workload(options_.workload);
  iterations_per_epoch_ = (workload.train_samples + batch_size_ - 1) / batch_size_;
  // A one-entry mix is one GPU model slowed down: every GPU of the count is that.
  if (options_.mix.size() == 1) {
    options_.gpu_model = options_.mix.front().model;
  }
  const auto load_model = [&](const std::string& name) {
    const trace::GpuModelFacts& info = trace::gpu_model_facts(name);
    const trace::PowerTrace trace = load_trace(options_, name);
    return Model{name, trace.profile(options_.workload, batch_size_),
                 PowerLimitRange{w_to_mw(static_cast<double>(trace.min_power_limit_w())),
                                 w_to_mw(static_cast<double>(trace.max_power_limit_w()))},
                 info.idle_power_w, std::string(info.name)};
  };
  std::vector<Model> distinct;
  const auto model_for = [&](const std::string& name) -> const Model& {
    for (const auto& m : distinct) {
      if (m.model == name) {
        return m;
      }
    }
    distinct.push_back(load_model(name));
    return distinct.back();
  };
  const auto shared_setup = [&](detail::SharedState& state, bool fresh) {
    if (!fresh && options_.gpu_count_from_state && state.magic == detail::kMagic &&
        state.gpu_count >= 1 && state.gpu_count <= static_cast<uint32_t>(detail::kMaxGpus)) {
      options_.gpu_count = static_cast<int>(state.gpu_count);
    }
    if (options_.gpu_count < 1 || options_.gpu_count > detail::kMaxGpus) {
      throw ConfigError(fmt::format("simulated GPU count {} must be in 1-{}", options_.gpu_count,
                                    detail::kMaxGpus));
    }
    if (options_.mix.size() > 1 && options_.mix.size() != static_cast<size_t>(options_.gpu_count)) {
      throw ConfigError(fmt::format(
          "sim:{} lists {} GPUs, but {} are asked for (one entry per GPU of the node, one per "
          "local rank)",
          mix_text(), options_.mix.size(), options_.gpu_count));
    }
    for (int g = 0; g < options_.gpu_count; ++g) {
      const auto& entry = options_.mix.empty()       ? SimGpuEntry{options_.gpu_model, 1.0}
                          : options_.mix.size() == 1 ? options_.mix.front()
                                                     : options_.mix[static_cast<size_t>(g)];
      models_.push_back(model_for(entry.model));
    }
    const std::string model_key =
        fmt::format("{}:{}:{}", mix_text(), options_.workload, batch_size_);
    if (!fresh) {
      const bool same = state.magic == detail::kMagic && state.version == detail::kVersion &&
                        state.gpu_count == static_cast<uint32_t>(options_.gpu_count) &&
                        std::string_view(state.model.data()) == model_key;
      if (!same) {
        const std::string theirs =
            state.magic == detail::kMagic && state.version == detail::kVersion
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
    if (model_key.size() >= state.model.size()) {
      throw ConfigError(fmt::format("simulated GPU spec '{}' is longer than {} characters",
                                    model_key, state.model.size() - 1));
    }
    std::copy(model_key.begin(), model_key.end(), state.model.begin());
    const int64_t now = options_.clock == SimClock::kReal ? monotonic_ns() : 0;
    for (int i = 0; i < options_.gpu_count; ++i) {
      detail::SharedGpu& g = state.gpus[static_cast<size_t>(i)];
      g.power_limit_mw = model_of(i).range_mw.max_mw;
      g.clock_ns = now;
      g.busy = options_.start_busy ? 1 : 0;
      g.energy_mj = 0;
      g.slowdown = options_.mix.empty()       ? 1.0
                   : options_.mix.size() == 1 ? options_.mix.front().slowdown
                                              : options_.mix[static_cast<size_t>(i)].slowdown;
    }
  };
  shared_ = std::make_unique<SharedStateFile>(options_.state_path, shared_setup);
  state_ = &shared_->state();
}

std::string SimGpuSet::mix_text() const {
  return options_.mix.empty() ? options_.gpu_model : trace::format_gpu_mix(options_.mix);
}

SimGpuSet::~SimGpuSet() = default;

std::string SimGpuSet::locator() const {
  std::string out = fmt::format("sim:{}:{}:{}", mix_text(), options_.workload, batch_size_);
  if (!options_.state_path.empty()) {
    out += fmt::format("@{}", options_.state_path.string());  // not "@" + s: GCC 12 -O3 bug 105329
  }
  return out;
}

std::string SimGpuSet::name(int gpu) const {
  check_index(gpu);
  return model_of(gpu).display_name + " (simulated)";
}

std::string SimGpuSet::uuid(int gpu) const {
  check_index(gpu);
  return fmt::format("SIM-{}-{}", model_of(gpu).model, gpu);
}

std::string SimGpuSet::describe(int gpu) const {
  check_index(gpu);
  const double slowdown = state_->gpus[static_cast<size_t>(gpu)].slowdown;
  return fmt::format("trace {} {} at batch size {} ({} iterations/epoch){}, {} clock",
                     model_of(gpu).model, options_.workload, batch_size_, iterations_per_epoch_,
                     slowdown == 1.0 ? "" : fmt::format(", {}x slower", slowdown),
                     options_.clock == SimClock::kReal ? "real" : "virtual");
}

double SimGpuSet::power_w_locked(int gpu) const {
  const detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
  if (g.busy == 0) {
    return model_of(gpu).idle_power_w;
  }
  return model_of(gpu).profile.average_power_w(mw_to_w(g.power_limit_mw));
}

std::chrono::nanoseconds SimGpuSet::iteration_time_locked(int gpu) const {
  const detail::SharedGpu& g = state_->gpus[static_cast<size_t>(gpu)];
  const auto traced = trace_iteration_time(gpu, g.power_limit_mw);
  return std::chrono::nanoseconds{
      static_cast<int64_t>(static_cast<double>(traced.count()) * g.slowdown)};
}

std::chrono::nanoseconds SimGpuSet::trace_iteration_time(int gpu, int64_t limit_mw) const {
  check_index(gpu);
  const double seconds = model_of(gpu).profile.time_per_epoch_s(mw_to_w(limit_mw)) /
                         static_cast<double>(iterations_per_epoch_);
  return std::chrono::nanoseconds{static_cast<int64_t>(seconds * 1e9)};
}

double SimGpuSet::trace_power_w(int gpu, int64_t limit_mw) const {
  check_index(gpu);
  return model_of(gpu).profile.average_power_w(mw_to_w(limit_mw));
}

double SimGpuSet::idle_power_w(int gpu) const {
  check_index(gpu);
  return model_of(gpu).idle_power_w;
}

const std::string& SimGpuSet::model(int gpu) const {
  check_index(gpu);
  return model_of(gpu).model;
}

double SimGpuSet::slowdown(int gpu) {
  check_index(gpu);
  SharedStateFile::Lock lock(*shared_);
  return state_->gpus[static_cast<size_t>(gpu)].slowdown;
}

void SimGpuSet::set_slowdown(int gpu, double slowdown) {
  check_index(gpu);
  if (!(slowdown > 0) || !std::isfinite(slowdown)) {
    throw ConfigError(
        fmt::format("simulated GPU {}: slowdown {} is not a number > 0", gpu, slowdown));
  }
  SharedStateFile::Lock lock(*shared_);
  settle(gpu, monotonic_ns());
  state_->gpus[static_cast<size_t>(gpu)].slowdown = slowdown;
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
  return model_of(gpu).range_mw;
}

int64_t SimGpuSet::default_power_limit_mw(int gpu) {
  check_index(gpu);
  return model_of(gpu).range_mw.max_mw;
}

void SimGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  check_index(gpu);
  check_limit(gpu, limit_mw, model_of(gpu).range_mw);
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
  g.energy_mj += zeus::energy_mj(model_of(gpu).idle_power_w, d);
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
