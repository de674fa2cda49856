#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/rapl/rapl_cpu_set.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/monitor/energy_monitor.h"
#include "zeus/monitor/power_monitor.h"

using namespace std::chrono_literals;
using ::testing::HasSubstr;

namespace zeus::monitor {
namespace {

std::unique_ptr<device::sim::SimGpuSet> busy_sim(int gpus = 2) {
  device::sim::SimGpuSetOptions options;
  options.gpu_count = gpus;
  options.clock = device::SimClock::kReal;
  options.start_busy = true;
  return std::make_unique<device::sim::SimGpuSet>(options);
}

TEST(IntegratePower, TrapezoidWithInterpolatedEnds) {
  const SteadyTime t0{};
  const std::vector<std::pair<SteadyTime, int64_t>> readings = {
      {t0, 100'000}, {t0 + 1s, 200'000}, {t0 + 2s, 200'000}};
  // 0-1 s ramps 100->200 W (150 J), 1-2 s holds 200 W (200 J).
  EXPECT_NEAR(*integrate_power_j(readings, t0, t0 + 2s), 350.0, 1e-9);
  // 0.5-1.5 s: ramp 150->200 over 0.5 s (87.5 J) + 100 J.
  EXPECT_NEAR(*integrate_power_j(readings, t0 + 500ms, t0 + 1500ms), 187.5, 1e-9);
  // Past the last reading the edge value is held.
  EXPECT_NEAR(*integrate_power_j(readings, t0 + 1s, t0 + 3s), 400.0, 1e-9);
  EXPECT_EQ(integrate_power_j(readings, t0 + 5s, t0 + 6s), std::nullopt);
  EXPECT_EQ(integrate_power_j({{t0, 1}}, t0, t0 + 1s), std::nullopt);
}

TEST(PowerMonitor, SamplesOnAFixedScheduleAndWritesCsv) {
  auto gpus = busy_sim();
  test::TempDir dir;
  PowerMonitorOptions options;
  options.period = 20ms;
  options.csv_paths = {dir / "gpu0.csv", dir / "gpu1.csv"};
  PowerMonitor monitor(gpus.get(), options);
  ASSERT_EQ(monitor.devices().size(), 2u);
  EXPECT_EQ(monitor.devices()[1].label, "gpu1");
  const auto started = std::chrono::steady_clock::now();
  monitor.start();
  ASSERT_TRUE(test::eventually([&] { return monitor.timeline().size() >= 5; }, 30s));
  monitor.stop();
  const auto elapsed = std::chrono::steady_clock::now() - started;
  const auto timeline = monitor.timeline();
  // On a fixed schedule: never more ticks than the time it ran allows (a late tick is not made
  // up by a burst); how many fewer a loaded machine takes is not this test's to bet on.
  EXPECT_LE(timeline.size(), static_cast<size_t>(elapsed / options.period) + 2);
  for (size_t i = 1; i < timeline.size(); ++i) {
    EXPECT_GT(timeline[i].time, timeline[i - 1].time);
  }
  const int64_t expected_mw = gpus->power_mw(0);
  EXPECT_EQ(*timeline.back().power_mw[0], expected_mw);

  std::ifstream csv(dir / "gpu0.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "Time,Power");
  const std::regex row(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9},(\d+))");
  size_t rows = 0;
  while (std::getline(csv, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, row)) << line;
    EXPECT_EQ(std::stoll(m[1]), expected_mw);
    ++rows;
  }
  EXPECT_EQ(rows, timeline.size());
  // Energy over the run: constant power, so P * t.
  const auto energy = monitor.energy_j(0, timeline.front().time, timeline.back().time);
  ASSERT_TRUE(energy.has_value());
  const double seconds =
      std::chrono::duration<double>(timeline.back().time - timeline.front().time).count();
  EXPECT_NEAR(*energy, static_cast<double>(expected_mw) / 1000.0 * seconds, 1e-6);
}

TEST(PowerMonitor, RingDropsOldestBeyondCapacity) {
  auto gpus = busy_sim(1);
  PowerMonitorOptions options;
  options.period = 5ms;
  options.capacity = 4;
  PowerMonitor monitor(gpus.get(), options);
  monitor.start();
  std::this_thread::sleep_for(100ms);
  monitor.stop();
  EXPECT_EQ(monitor.sample_count(), 4u);
  EXPECT_GT(monitor.dropped_count(), 0u);
}

TEST(PowerMonitor, RejectsBadOptionsWithoutCreatingFiles) {
  auto gpus = busy_sim(2);
  test::TempDir dir;
  PowerMonitorOptions options;
  options.period = 1ms;
  EXPECT_THROW(PowerMonitor(gpus.get(), options), ConfigError);
  options.period = 10ms;
  options.gpus = {0, 5};
  options.csv_paths = {dir / "a.csv", dir / "b.csv"};
  EXPECT_THROW(PowerMonitor(gpus.get(), options), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.csv"));
  options.gpus = {0, 1};
  // A missing directory is made (every level); one that cannot be (a file in the way) is an
  // IoError naming the part in the way.
  std::ofstream(dir / "in-the-way") << "x";
  options.csv_paths = {dir / "a.csv", dir / "in-the-way/b.csv"};
  try {
    PowerMonitor monitor(gpus.get(), options);
    ADD_FAILURE() << "a power log under a file was opened";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + (dir / "in-the-way").string() + "' is a file"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "a.csv")) << "no half-made output";
  options.csv_paths = {dir / "a.csv", dir / "missing/deeper/b.csv"};
  PowerMonitor made(gpus.get(), options);
  EXPECT_TRUE(std::filesystem::exists(dir / "missing/deeper/b.csv"));
  EXPECT_THROW(PowerMonitor(nullptr, {}), ConfigError);
}

TEST(PowerMonitor, GpuLostStopsSamplingAndKeepsTimeline) {
  test::FakeNvml fake(test::four_a40s());
  test::TempDir dir;
  const auto lost = dir / "lost";
  fake.set_fault("lost_when_exists", lost.string());
  device::nvml::NvmlGpuSet gpus;
  PowerMonitorOptions options;
  options.period = 5ms;
  PowerMonitor monitor(&gpus, options);
  monitor.start();
  ASSERT_TRUE(test::eventually([&] { return monitor.sample_count() >= 5; }, 10s));
  std::ofstream(lost) << "";  // the GPU falls off the bus
  ASSERT_TRUE(test::eventually([&] { return monitor.error() != nullptr; }, 10s));
  const size_t taken = monitor.sample_count();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(monitor.sample_count(), taken) << "sampling stopped at the loss";
  monitor.stop();
  EXPECT_GE(taken, 5u);
  EXPECT_EQ(monitor.timeline().size(), taken) << "the samples before the loss are kept";
  try {
    std::rethrow_exception(monitor.error());
  } catch (const DeviceLost& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPU is lost"));
  }
}

TEST(EnergyMonitor, NestedWindowsFromCounters) {
  device::sim::SimGpuSetOptions options;
  options.gpu_count = 2;
  device::sim::SimGpuSet gpus(options);  // virtual clock: energy only moves with work
  EnergyMonitor monitor(&gpus);
  monitor.begin_window("epoch");
  gpus.run_iterations(0, 10);
  monitor.begin_window("step");
  const auto step = gpus.run_iterations(1, 3);
  const Measurement inner = monitor.end_window("step");
  gpus.run_iterations(0, 5);
  const Measurement outer = monitor.end_window("epoch");
  const auto profile = trace::PowerTrace::load_gpu("v100").profile("imagenet", 256);
  const double busy_w = profile.average_power_w(250);
  const double step_s = std::chrono::duration<double>(step).count();
  ASSERT_EQ(inner.gpu_energy_j.size(), 2u);
  EXPECT_NEAR(inner.gpu_energy_j[0], 0.0, 1e-3);
  EXPECT_NEAR(inner.gpu_energy_j[1], busy_w * step_s, 2e-3);
  EXPECT_NEAR(outer.gpu_energy_j[0], busy_w * 15 * step_s / 3, 2e-3);
  EXPECT_NEAR(outer.total_energy_j(), outer.gpu_energy_j[0] + outer.gpu_energy_j[1], 1e-9);
  EXPECT_FALSE(monitor.is_open("epoch"));
  // Wall-clock windows this short draw the short-window warning.
  EXPECT_THAT(inner.warnings, ::testing::Contains(HasSubstr("shorter than the energy counter")));
}

TEST(EnergyMonitor, WindowNamesAreChecked) {
  device::sim::SimGpuSet gpus({});
  EnergyMonitor monitor(&gpus);
  monitor.begin_window("a");
  EXPECT_THROW(monitor.begin_window("a"), ConfigError);
  EXPECT_THROW(monitor.end_window("b"), ConfigError);
  monitor.end_window("a");
  EXPECT_THROW(monitor.end_window("a"), ConfigError);
}

TEST(EnergyMonitor, FallsBackToPowerTimelineWithoutCounter) {
  auto spec = test::four_a40s();
  test::FakeNvml fake(spec, /*minimal_library=*/true);
  device::nvml::NvmlGpuSet gpus;
  EnergyMonitorOptions options;
  options.gpus = {1};
  options.fallback_period = 10ms;
  EnergyMonitor monitor(&gpus, options);
  monitor.begin_window("w");
  std::this_thread::sleep_for(300ms);
  const Measurement m = monitor.end_window("w");
  ASSERT_EQ(m.gpu_energy_j.size(), 1u);
  // 110 W (GetPowerUsage of GPU 1) over the window.
  EXPECT_NEAR(m.gpu_energy_j[0], 110.0 * m.elapsed.count(), 110.0 * 0.05);
  EXPECT_EQ(m.gpu_source[0], EnergySource::kIntegral);
  EXPECT_FALSE(m.gpu_integral_j[0]) << "nothing to compare the integral with";
  EXPECT_TRUE(m.warnings.empty());
}

// With a counter and a timeline that samples the same GPUs (zeus monitor's case): the counter
// is the energy and the integral is there to compare; a counter that fails at the end (a GPU
// lost) falls back to the samples taken, with a warning, where a timeline has them.
TEST(EnergyMonitor, CountersAreComparedWithTheTimelineAndFallBackToItWhenLost) {
  test::FakeNvml fake(test::four_a40s());
  test::TempDir dir;
  const auto lost = dir / "lost";
  fake.set_fault("lost_when_exists", lost.string());
  device::nvml::NvmlGpuSet gpus;
  PowerMonitorOptions sampling;
  sampling.gpus = {0, 1};
  sampling.period = 10ms;
  PowerMonitor timeline(&gpus, sampling);
  timeline.start();
  EnergyMonitorOptions options;
  options.gpus = {0, 1, 2};
  options.timeline = &timeline;
  EnergyMonitor monitor(&gpus, options);
  monitor.begin_window("w");
  std::this_thread::sleep_for(300ms);
  const Measurement m = monitor.end_window("w");
  ASSERT_EQ(m.gpu_source.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(m.gpu_source[i], EnergySource::kCounter) << i;
  }
  ASSERT_TRUE(m.gpu_integral_j[0] && m.gpu_integral_j[1]);
  EXPECT_FALSE(m.gpu_integral_j[2]) << "GPU 2 is not sampled";
  EXPECT_NEAR(*m.gpu_integral_j[1], m.gpu_energy_j[1], 0.1 * m.gpu_energy_j[1]);

  options.gpus = {0, 1};
  EnergyMonitor sampled(&gpus, options);
  monitor.begin_window("lost");
  sampled.begin_window("lost");
  std::this_thread::sleep_for(200ms);
  const auto last_sample = timeline.timeline().back().time;
  std::ofstream(lost) << "";
  ASSERT_TRUE(test::eventually([&] { return timeline.error() != nullptr; }, 10s));
  const Measurement fallback = sampled.end_window("lost", last_sample);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(fallback.gpu_source[i], EnergySource::kIntegral) << i;
    EXPECT_GT(fallback.gpu_energy_j[i], 0) << i;
  }
  EXPECT_NEAR(fallback.gpu_energy_j[1], 110.0 * fallback.elapsed.count(), 110.0 * 0.05);
  EXPECT_THAT(fallback.warnings, ::testing::Contains(HasSubstr("failed at the end")));
  EXPECT_THROW(monitor.end_window("lost", last_sample), DeviceLost)
      << "GPU 2 has no samples to fall back to";
}

TEST(EnergyMonitor, CpuWindowsMeasurePackagesAndTheirDram) {
  test::FakeRapl fake;
  device::rapl::RaplCpuSet cpus({fake.root()});
  EnergyMonitorOptions options;
  options.cpus = &cpus;
  EnergyMonitor monitor(nullptr, options);
  monitor.begin_window("w");
  fake.set("intel-rapl:0", 1600);                // +600 µJ on package 0
  fake.set("intel-rapl:0/intel-rapl:0:1", 450);  // +250 µJ on its DRAM
  const Measurement m = monitor.end_window("w");
  ASSERT_EQ(m.cpu_energy_j.size(), 2u);
  EXPECT_DOUBLE_EQ(m.cpu_energy_j[0], 600e-6);
  EXPECT_DOUBLE_EQ(m.cpu_energy_j[1], 0.0);
  ASSERT_EQ(m.dram_energy_j.size(), 2u);
  ASSERT_TRUE(m.dram_energy_j[0].has_value());
  EXPECT_DOUBLE_EQ(*m.dram_energy_j[0], 250e-6);
  EXPECT_FALSE(m.dram_energy_j[1].has_value()) << "package 1 has no DRAM zone";
  EXPECT_TRUE(m.gpu_energy_j.empty());
}

}  // namespace
}  // namespace zeus::monitor
