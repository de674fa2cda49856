#include "zeus/metrics/node_sampler.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/power.h"

namespace zeus::metrics {

namespace {

struct GpuFamilies {
  Family power{"zeus_gpu_power_watts",
               "GPU power draw (W), NVML's instant reading where it has one",
               MetricType::kGauge,
               {}};
  Family energy{"zeus_gpu_energy_joules_total",
                "GPU energy (J): NVML's counter since the driver loaded, or power integrated by "
                "the exporter since it started on GPUs without one",
                MetricType::kCounter,
                {}};
  Family limit{
      "zeus_gpu_power_limit_watts", "GPU power limit in force (W)", MetricType::kGauge, {}};
  Family limit_min{"zeus_gpu_power_limit_min_watts",
                   "Lowest power limit the GPU accepts (W)",
                   MetricType::kGauge,
                   {}};
  Family limit_max{"zeus_gpu_power_limit_max_watts",
                   "Highest power limit the GPU accepts (W)",
                   MetricType::kGauge,
                   {}};
  Family temperature{"zeus_gpu_temperature_celsius",
                     "GPU core temperature (degrees Celsius)",
                     MetricType::kGauge,
                     {}};
  Family sm_clock{"zeus_gpu_sm_clock_hertz", "GPU SM clock (Hz)", MetricType::kGauge, {}};
  Family memory_clock{
      "zeus_gpu_memory_clock_hertz", "GPU memory clock (Hz)", MetricType::kGauge, {}};
  Family power_throttle{"zeus_gpu_power_throttle_seconds_total",
                        "Time the GPU's clocks were held down by its power limit (s, since the "
                        "driver loaded)",
                        MetricType::kCounter,
                        {}};
  Family thermal_throttle{"zeus_gpu_thermal_throttle_seconds_total",
                          "Time the GPU's clocks were held down by temperature (s, since the "
                          "driver loaded)",
                          MetricType::kCounter,
                          {}};
  Family up{"zeus_exporter_gpu_up",
            "1 when the GPU's last read succeeded, 0 when it failed",
            MetricType::kGauge,
            {}};
  Family holder{"zeus_gpu_limit_holder_info",
                "A process holding a setting it changed on the GPU (zeusd's leases): 1 per holder",
                MetricType::kGauge,
                {}};
};

void add_if(Family& f, const Labels& labels, const std::optional<double>& value) {
  if (value) {
    f.add(labels, *value);
  }
}

}  // namespace

NodeSampler::NodeSampler(GpuTelemetry* gpus, device::CpuSet* cpus, NodeSamplerOptions options)
    : gpus_(gpus), cpus_(cpus), options_(std::move(options)) {
  if (options_.period <= std::chrono::milliseconds(0)) {
    throw ConfigError(
        fmt::format("metrics sample period {} ms: must be positive", options_.period.count()));
  }
  if (options_.host.empty()) {
    options_.host = host_name();
  }
  gpu_state_.resize(gpus_ != nullptr ? static_cast<size_t>(gpus_->count()) : 0);
  cpu_state_.resize(cpus_ != nullptr ? static_cast<size_t>(cpus_->count()) : 0);
  for (size_t i = 0; i < cpu_state_.size(); ++i) {
    cpu_names_.push_back(cpus_->name(static_cast<int>(i)));
  }
  sample_now();
  thread_ = std::thread([this] { run(); });
}

NodeSampler::~NodeSampler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void NodeSampler::run() {
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    next += options_.period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) {
      next = now;  // a missed tick is skipped, not bunched
    }
    if (cv_.wait_until(lock, next, [this] { return stopping_; })) {
      break;
    }
    lock.unlock();
    sample_now();
    lock.lock();
  }
}

void NodeSampler::sample_now() {
  const auto t0 = std::chrono::steady_clock::now();
  // Devices are read outside the lock (a slow GPU must not hold up a scrape). Only this
  // function writes the device state, called from one thread at a time: the constructor, then
  // the sampling thread (tests call it only on a sampler they do not race).
  std::vector<std::optional<GpuReading>> gpu_reads(gpu_state_.size());
  std::vector<std::string> gpu_errors(gpu_state_.size());
  for (size_t i = 0; i < gpu_reads.size(); ++i) {
    try {
      gpu_reads[i] = gpus_->read(static_cast<int>(i));
    } catch (const std::exception& e) {
      gpu_errors[i] = e.what();
    }
  }
  std::vector<CpuState> cpu_reads(cpu_state_.size());
  std::vector<std::string> cpu_errors(cpu_state_.size());
  for (size_t i = 0; i < cpu_reads.size(); ++i) {
    try {
      cpu_reads[i].energy_j = uj_to_j(cpus_->energy_uj(static_cast<int>(i)));
      if (const auto dram = cpus_->dram_energy_uj(static_cast<int>(i))) {
        cpu_reads[i].dram_energy_j = uj_to_j(*dram);
      }
    } catch (const std::exception& e) {
      cpu_errors[i] = e.what();
    }
  }
  const auto t1 = std::chrono::steady_clock::now();

  std::lock_guard lock(mu_);
  for (size_t i = 0; i < gpu_reads.size(); ++i) {
    GpuState& s = gpu_state_[i];
    if (!gpu_reads[i]) {
      if (s.last || s.errors == 0) {  // said once per failure, not every tick
        logger().warn("metrics: reading GPU {} failed: {}", i, gpu_errors[i]);
      }
      ++s.errors;
      s.last.reset();
      s.last_time.reset();
      continue;
    }
    GpuReading& r = *gpu_reads[i];
    if (!r.energy_j && r.power_w) {
      // last_time is set only while the last reading had a power and no counter.
      if (s.last_time) {
        const double dt = std::chrono::duration<double>(t1 - *s.last_time).count();
        s.integrated_energy_j += (*s.last->power_w + *r.power_w) / 2 * dt;
      }
      s.last_time = t1;
      r.energy_j = s.integrated_energy_j;
    } else {
      s.last_time.reset();
    }
    s.last = r;
  }
  for (size_t i = 0; i < cpu_reads.size(); ++i) {
    CpuState& s = cpu_state_[i];
    if (!cpu_errors[i].empty()) {
      if (s.energy_j || s.errors == 0) {
        logger().warn("metrics: reading CPU package {} failed: {}", i, cpu_errors[i]);
      }
      ++s.errors;
      s.energy_j.reset();
      s.dram_energy_j.reset();
      continue;
    }
    s.energy_j = cpu_reads[i].energy_j;
    s.dram_energy_j = cpu_reads[i].dram_energy_j;
  }
  ++samples_;
  last_sample_duration_s_ = std::chrono::duration<double>(t1 - t0).count();
  last_sample_unix_s_ =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t NodeSampler::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

std::vector<Family> NodeSampler::families() const {
  GpuFamilies g;
  Family cpu_energy{"zeus_cpu_energy_joules_total",
                    "CPU package energy from RAPL (J since the exporter started, wrap-corrected)",
                    MetricType::kCounter,
                    {}};
  Family dram_energy{"zeus_dram_energy_joules_total",
                     "DRAM energy from RAPL (J since the exporter started, wrap-corrected)",
                     MetricType::kCounter,
                     {}};
  Family errors{"zeus_exporter_read_errors_total",
                "Failed reads of a device by the exporter's sampler (that device's series are "
                "left out until it reads again)",
                MetricType::kCounter,
                {}};
  Family samples{"zeus_exporter_samples_total",
                 "Sampler ticks since the exporter started",
                 MetricType::kCounter,
                 {}};
  Family duration{"zeus_exporter_sample_duration_seconds",
                  "How long the last tick took to read every device (s)",
                  MetricType::kGauge,
                  {}};
  Family last_time{"zeus_exporter_last_sample_timestamp_seconds",
                   "When the last tick was taken (Unix time, s)",
                   MetricType::kGauge,
                   {}};
  Family scrapes{"zeus_exporter_scrapes_total",
                 "Scrapes answered since the exporter started",
                 MetricType::kCounter,
                 {}};

  Family restore_failures{"zeus_restore_failures_total",
                          "Restores of a changed GPU setting that failed (each is retried)",
                          MetricType::kCounter,
                          {}};
  Family restores_pending{"zeus_restores_pending",
                          "Changed GPU settings whose restore has not succeeded yet",
                          MetricType::kGauge,
                          {}};

  const std::vector<LimitHolder> holders =
      options_.holders ? options_.holders() : std::vector<LimitHolder>{};
  if (options_.restores) {
    const RestoreCounts counts = options_.restores();
    restore_failures.add({{"host", options_.host}}, static_cast<double>(counts.failures));
    restores_pending.add({{"host", options_.host}}, static_cast<double>(counts.pending));
  }
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < gpu_state_.size(); ++i) {
    const GpuIdentity& id = gpus_->identity(static_cast<int>(i));
    Labels labels{{"gpu", std::to_string(id.index)},
                  {"uuid", id.uuid},
                  {"name", id.name},
                  {"host", options_.host}};
    if (options_.gpu_labels) {
      for (auto& extra : options_.gpu_labels(id)) {
        labels.push_back(std::move(extra));
      }
    }
    const GpuState& s = gpu_state_[i];
    g.up.add(labels, s.last ? 1 : 0);
    errors.add({{"device", fmt::format("gpu{}", id.index)}, {"host", options_.host}},
               static_cast<double>(s.errors));
    if (!s.last) {
      continue;
    }
    const GpuReading& r = *s.last;
    add_if(g.power, labels, r.power_w);
    add_if(g.energy, labels, r.energy_j);
    add_if(g.limit, labels, r.power_limit_w);
    add_if(g.limit_min, labels, r.power_limit_min_w);
    add_if(g.limit_max, labels, r.power_limit_max_w);
    add_if(g.temperature, labels, r.temperature_c);
    add_if(g.sm_clock, labels, r.sm_clock_hz);
    add_if(g.memory_clock, labels, r.memory_clock_hz);
    add_if(g.power_throttle, labels, r.power_throttle_s);
    add_if(g.thermal_throttle, labels, r.thermal_throttle_s);
  }
  for (const LimitHolder& h : holders) {
    if (h.gpu < 0 || static_cast<size_t>(h.gpu) >= gpu_state_.size()) {
      continue;
    }
    const GpuIdentity& id = gpus_->identity(h.gpu);
    Labels labels{{"gpu", std::to_string(h.gpu)},
                  {"uuid", id.uuid},
                  {"host", options_.host},
                  {"setting", h.setting},
                  {"pid", std::to_string(h.pid)},
                  {"uid", std::to_string(h.uid)},
                  {"job", h.job}};
    if (options_.gpu_labels) {
      for (auto& extra : options_.gpu_labels(id)) {
        labels.push_back(std::move(extra));
      }
    }
    g.holder.add(std::move(labels), 1);
  }
  for (size_t i = 0; i < cpu_state_.size(); ++i) {
    const Labels labels{
        {"cpu", std::to_string(i)}, {"name", cpu_names_[i]}, {"host", options_.host}};
    const CpuState& s = cpu_state_[i];
    errors.add({{"device", fmt::format("cpu{}", i)}, {"host", options_.host}},
               static_cast<double>(s.errors));
    add_if(cpu_energy, labels, s.energy_j);
    add_if(dram_energy, labels, s.dram_energy_j);
  }
  const Labels host{{"host", options_.host}};
  samples.add(host, static_cast<double>(samples_));
  duration.add(host, last_sample_duration_s_);
  last_time.add(host, last_sample_unix_s_);
  scrapes.add(host, static_cast<double>(scrapes_));
  return {std::move(g.power),          std::move(g.energy),
          std::move(g.limit),          std::move(g.limit_min),
          std::move(g.limit_max),      std::move(g.temperature),
          std::move(g.sm_clock),       std::move(g.memory_clock),
          std::move(g.power_throttle), std::move(g.thermal_throttle),
          std::move(g.holder),         std::move(restore_failures),
          std::move(restores_pending), std::move(g.up),
          std::move(cpu_energy),       std::move(dram_energy),
          std::move(errors),           std::move(samples),
          std::move(duration),         std::move(last_time),
          std::move(scrapes)};
}

std::string NodeSampler::scrape() const {
  {
    std::lock_guard lock(mu_);
    ++scrapes_;
  }
  return render(families());
}

}  // namespace zeus::metrics
