// Cost of one power sample of 8 GPUs (simulated, the NVML backend over the fake NVML and the AMD
// SMI backend over the fake libamd_smi, side by side in one run),
// and the lateness of the PowerMonitor's fixed schedule at 10 ms and 100 ms periods.
//
//   build/release/bench/monitor_bench                 # all; jitter runs 10 s per period
//   ZEUS_BENCH_JITTER_S=2 build/release/bench/monitor_bench --benchmark_filter=Sample
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zeus/device/amdsmi/amdsmi_gpu_set.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/monitor/power_monitor.h"

namespace {

constexpr int kGpus = 8;

// One sample as the PowerMonitor takes it: a reading per GPU.
void sample_all(zeus::device::GpuSet& gpus) {
  for (int i = 0; i < gpus.count(); ++i) {
    benchmark::DoNotOptimize(gpus.power_mw(i));
  }
}

std::unique_ptr<zeus::device::sim::SimGpuSet> make_sim() {
  zeus::device::sim::SimGpuSetOptions options;
  options.gpu_count = kGpus;
  options.clock = zeus::device::SimClock::kReal;
  options.start_busy = true;
  return std::make_unique<zeus::device::sim::SimGpuSet>(options);
}

// The benchmark's loop: one sample of every GPU per iteration.
void sample_loop(benchmark::State& state, zeus::device::GpuSet& gpus) {
  for (auto _ : state) {
    sample_all(gpus);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_SampleSim8(benchmark::State& state) {
  auto gpus = make_sim();
  sample_loop(state, *gpus);
}
BENCHMARK(BM_SampleSim8);

// A fake NVML machine of 8 A40s in a temporary state file.
std::filesystem::path write_fake_state() {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("zeus-bench-{}", getpid());
  std::filesystem::create_directories(dir);
  nlohmann::json state;
  for (int i = 0; i < kGpus; ++i) {
    state["gpus"].push_back({{"name", "NVIDIA A40"},
                             {"uuid", fmt::format("GPU-bench-{}", i)},
                             {"power_mw", 150000},
                             {"energy_mj", 0},
                             {"limit_mw", 300000},
                             {"min_limit_mw", 100000},
                             {"max_limit_mw", 300000},
                             {"default_limit_mw", 300000},
                             {"instant_power", true},
                             {"energy_counter", true}});
  }
  state["faults"] = nlohmann::json::object();
  state["limit_history"] = nlohmann::json::array();
  std::ofstream(dir / "state.json") << state.dump();
  return dir / "state.json";
}

void BM_SampleFakeNvml8(benchmark::State& state) {
  const auto path = write_fake_state();
  ::setenv("FAKE_NVML_STATE", path.c_str(), 1);
  zeus::device::nvml::NvmlGpuSetOptions options;
  options.library.path = ZEUS_FAKE_NVML_FULL;
  options.respect_visible_devices = false;
  zeus::device::nvml::NvmlGpuSet gpus(options);
  sample_loop(state, gpus);
  std::filesystem::remove_all(path.parent_path());
}
BENCHMARK(BM_SampleFakeNvml8);

// The same 8 GPUs as MI300Xs behind the fake libamd_smi (socket power in W, caps in uW).
void BM_SampleFakeAmdsmi8(benchmark::State& state) {
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("zeus-bench-amd-{}", getpid());
  std::filesystem::create_directories(dir);
  nlohmann::json s;
  for (int i = 0; i < kGpus; ++i) {
    s["gpus"].push_back({{"name", "AMD Instinct MI300X"},
                         {"uuid", fmt::format("GPU-amdbench{}", i)},
                         {"hip_id", i},
                         {"power_w", 150},
                         {"cap_uw", 300000000},
                         {"min_cap_uw", 100000000},
                         {"max_cap_uw", 300000000},
                         {"default_cap_uw", 300000000}});
  }
  s["faults"] = nlohmann::json::object();
  std::ofstream(dir / "state.json") << s.dump();
  ::setenv("FAKE_AMDSMI_STATE", (dir / "state.json").c_str(), 1);
  zeus::device::amdsmi::AmdsmiGpuSetOptions options;
  options.library.path = ZEUS_FAKE_AMDSMI;
  options.respect_visible_devices = false;
  zeus::device::amdsmi::AmdsmiGpuSet gpus(options);
  sample_loop(state, gpus);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SampleFakeAmdsmi8);

// Runs a PowerMonitor over 8 simulated GPUs and reports how late samples were taken.
void report_jitter(std::chrono::milliseconds period, std::chrono::seconds duration) {
  auto gpus = make_sim();
  zeus::monitor::PowerMonitorOptions options;
  options.period = period;
  zeus::monitor::PowerMonitor monitor(gpus.get(), options);
  monitor.start();
  std::this_thread::sleep_for(duration);
  monitor.stop();
  std::vector<double> late_us;
  for (const auto& s : monitor.timeline()) {
    late_us.push_back(std::chrono::duration<double, std::micro>(s.lateness).count());
  }
  std::sort(late_us.begin(), late_us.end());
  const auto pct = [&](double p) {
    return late_us[std::min(late_us.size() - 1, static_cast<size_t>(p * late_us.size()))];
  };
  const double expected = std::chrono::duration<double>(duration) / period;
  fmt::print(
      "jitter period={}ms duration={}s samples={} (expected {:.0f}) lateness p50={:.1f}us "
      "p99={:.1f}us max={:.1f}us\n",
      period.count(), duration.count(), late_us.size(), expected, pct(0.50), pct(0.99),
      late_us.back());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const char* env = std::getenv("ZEUS_BENCH_JITTER_S");
  const std::chrono::seconds duration{env != nullptr ? std::atoi(env) : 10};
  if (duration.count() > 0) {
    report_jitter(std::chrono::milliseconds(10), duration);
    report_jitter(std::chrono::milliseconds(100), duration);
  }
  return 0;
}
