// The node exporter's pieces without a network: the text format, the sampler over a fake
// telemetry (a first-class GpuTelemetry), NVML's telemetry over the fake NVML, and the route.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "metrics_support.h"
#include "support/http_client.h"
#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/common/secret_file.h"
#include "zeus/device/discovery.h"
#include "zeus/device/rapl/rapl_cpu_set.h"
#include "zeus/exporter/metrics_server.h"
#include "zeus/metrics/exposition.h"
#include "zeus/metrics/gpu_set_telemetry.h"
#include "zeus/metrics/node_sampler.h"

namespace zeus::test {
namespace {

using metrics::Family;
using metrics::GpuReading;
using metrics::MetricType;
using ::testing::HasSubstr;
using ::testing::Not;

// Readings set by the test; a GPU set to fail throws DeviceLost like a lost GPU.
class FakeTelemetry final : public metrics::GpuTelemetry {
 public:
  explicit FakeTelemetry(int n) {
    for (int i = 0; i < n; ++i) {
      ids_.push_back({i, "GPU-" + std::to_string(i), "Test GPU"});
      readings_.emplace_back();
      failing_.push_back(false);
    }
  }
  int count() const override { return static_cast<int>(ids_.size()); }
  const metrics::GpuIdentity& identity(int gpu) const override { return ids_.at(gpu); }
  GpuReading read(int gpu) override {
    std::lock_guard lock(mu_);
    if (failing_.at(gpu)) {
      throw DeviceLost("GPU " + std::to_string(gpu) + ": nvmlDeviceGetPowerUsage: GPU is lost");
    }
    return readings_.at(gpu);
  }
  void set(int gpu, GpuReading r) {
    std::lock_guard lock(mu_);
    readings_.at(gpu) = r;
  }
  void fail(int gpu, bool failing) {
    std::lock_guard lock(mu_);
    failing_.at(gpu) = failing;
  }

 private:
  std::mutex mu_;
  std::vector<metrics::GpuIdentity> ids_;
  std::vector<GpuReading> readings_;
  std::vector<bool> failing_;
};

const std::vector<std::string> kNodeFamilies = {
    "zeus_gpu_power_watts gauge",
    "zeus_gpu_energy_joules_total counter",
    "zeus_gpu_power_limit_watts gauge",
    "zeus_gpu_power_limit_min_watts gauge",
    "zeus_gpu_power_limit_max_watts gauge",
    "zeus_gpu_temperature_celsius gauge",
    "zeus_gpu_sm_clock_hertz gauge",
    "zeus_gpu_memory_clock_hertz gauge",
    "zeus_gpu_power_throttle_seconds_total counter",
    "zeus_gpu_thermal_throttle_seconds_total counter",
    "zeus_gpu_limit_holder_info gauge",
    "zeus_restore_failures_total counter",
    "zeus_restores_pending gauge",
    "zeus_cpu_energy_joules_total counter",
    "zeus_dram_energy_joules_total counter",
    "zeus_exporter_read_errors_total counter",
};

TEST(Exposition, RendersHelpTypeAndEscapedSeries) {
  Family f{"zeus_test_watts", "A help text with a \\ and a\nnewline", MetricType::kGauge, {}};
  f.add({{"gpu", "0"}, {"name", "say \"hi\"\\\n"}}, 151.5);
  f.add({}, std::nan(""));
  Family empty{"zeus_empty_total", "Nothing yet", MetricType::kCounter, {}};
  EXPECT_EQ(metrics::render({f, empty}),
            "# HELP zeus_test_watts A help text with a \\\\ and a\\nnewline\n"
            "# TYPE zeus_test_watts gauge\n"
            "zeus_test_watts{gpu=\"0\",name=\"say \\\"hi\\\"\\\\\\n\"} 151.5\n"
            "zeus_test_watts NaN\n"
            "# HELP zeus_empty_total Nothing yet\n"
            "# TYPE zeus_empty_total counter\n");
  EXPECT_EQ(metrics::format_value(INFINITY), "+Inf");
  EXPECT_EQ(metrics::format_value(-INFINITY), "-Inf");
  EXPECT_EQ(metrics::format_value(0.1), "0.1");
  EXPECT_EQ(metrics::format_value(3e9), "3000000000");
}

TEST(Exposition, RefusesNamesPrometheusWouldNotParse) {
  EXPECT_THROW(metrics::render({Family{"9lives", "", MetricType::kGauge, {}}}), ConfigError);
  Family bad_label{"ok", "", MetricType::kGauge, {}};
  bad_label.add({{"a:b", "x"}}, 1);
  EXPECT_THROW(metrics::render({bad_label}), ConfigError);
  EXPECT_TRUE(metrics::valid_metric_name("zeus:rate_5m"));
  EXPECT_FALSE(metrics::valid_label_name("zeus:rate"));
}

TEST(NodeSampler, DeclaresEveryFamilyOnANodeWithoutDevices) {
  metrics::NodeSampler sampler(nullptr, nullptr, {.host = "node1"});
  const std::string text = sampler.scrape();
  for (const std::string& family : kNodeFamilies) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + family + "\n"));
  }
  EXPECT_THAT(text, Not(HasSubstr("zeus_gpu_power_watts{")));
  EXPECT_EQ(exposition_value(text, "zeus_exporter_scrapes_total{host=\"node1\"}"), 1)
      << "a scrape counts itself";
  EXPECT_EQ(exposition_value(sampler.scrape(), "zeus_exporter_scrapes_total{host=\"node1\"}"), 2);
}

TEST(NodeSampler, AFailingGpuLeavesTheOthersAndCountsItsErrors) {
  FakeTelemetry gpus(2);
  GpuReading r;
  r.power_w = 151;
  r.energy_j = 5000;
  r.power_limit_w = 300;
  r.temperature_c = 61;
  gpus.set(0, r);
  r.power_w = 90;
  gpus.set(1, r);
  gpus.fail(1, true);
  metrics::NodeSampler sampler(&gpus, nullptr, {.period = std::chrono::hours(1), .host = "n"});
  const std::string gpu0 = "{gpu=\"0\",uuid=\"GPU-0\",name=\"Test GPU\",host=\"n\"}";
  const std::string gpu1 = "{gpu=\"1\",uuid=\"GPU-1\",name=\"Test GPU\",host=\"n\"}";
  std::string text = sampler.scrape();
  EXPECT_EQ(exposition_value(text, "zeus_gpu_power_watts" + gpu0), 151);
  EXPECT_EQ(exposition_value(text, "zeus_gpu_temperature_celsius" + gpu0), 61);
  EXPECT_EQ(exposition_value(text, "zeus_gpu_power_watts" + gpu1), std::nullopt);
  EXPECT_EQ(exposition_value(text, "zeus_exporter_gpu_up" + gpu1), 0);
  EXPECT_EQ(exposition_value(text, "zeus_exporter_read_errors_total{device=\"gpu1\",host=\"n\"}"),
            1);
  EXPECT_EQ(exposition_value(text, "zeus_exporter_read_errors_total{device=\"gpu0\",host=\"n\"}"),
            0);
  EXPECT_EQ(exposition_value(text, "zeus_gpu_sm_clock_hertz" + gpu0), std::nullopt)
      << "a reading the GPU lacks has no series";

  sampler.sample_now();
  EXPECT_EQ(exposition_value(sampler.scrape(),
                             "zeus_exporter_read_errors_total{device=\"gpu1\",host=\"n\"}"),
            2);
  gpus.fail(1, false);
  sampler.sample_now();
  text = sampler.scrape();
  EXPECT_EQ(exposition_value(text, "zeus_gpu_power_watts" + gpu1), 90);
  EXPECT_EQ(exposition_value(text, "zeus_exporter_gpu_up" + gpu1), 1);
}

TEST(NodeSampler, IntegratesPowerOnGpusWithoutAnEnergyCounter) {
  FakeTelemetry gpus(1);
  GpuReading r;
  r.power_w = 100;
  gpus.set(0, r);
  const auto t0 = std::chrono::steady_clock::now();
  metrics::NodeSampler sampler(&gpus, nullptr, {.period = std::chrono::hours(1), .host = "n"});
  const auto t1 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t2 = std::chrono::steady_clock::now();
  sampler.sample_now();
  const auto t3 = std::chrono::steady_clock::now();
  const auto energy = exposition_value(
      sampler.scrape(),
      "zeus_gpu_energy_joules_total{gpu=\"0\",uuid=\"GPU-0\",name=\"Test GPU\",host=\"n\"}");
  ASSERT_TRUE(energy);
  // 100 W between the two ticks: the time between them lies within [t2 - t1, t3 - t0].
  EXPECT_GE(*energy, 100 * std::chrono::duration<double>(t2 - t1).count());
  EXPECT_LE(*energy, 100 * std::chrono::duration<double>(t3 - t0).count());
}

TEST(NodeSampler, NamesTheProcessesHoldingAGpusSettings) {
  FakeTelemetry gpus(2);
  gpus.set(0, GpuReading{.power_w = 1});
  gpus.set(1, GpuReading{.power_w = 1});
  metrics::NodeSamplerOptions options{.period = std::chrono::hours(1), .host = "n"};
  options.holders = [] {
    return std::vector<metrics::LimitHolder>{{1, "power_limit", 4242, 1000, "831"},
                                             {7, "power_limit", 1, 0, ""}};  // no such GPU
  };
  metrics::NodeSampler sampler(&gpus, nullptr, options);
  const std::string text = sampler.scrape();
  EXPECT_EQ(exposition_value(text,
                             "zeus_gpu_limit_holder_info{gpu=\"1\",uuid=\"GPU-1\",host=\"n\","
                             "setting=\"power_limit\",pid=\"4242\",uid=\"1000\",job=\"831\"}"),
            1);
  EXPECT_THAT(text, Not(HasSubstr("gpu=\"7\"")));
}

TEST(NodeSampler, ReadsRaplPackagesAndDram) {
  FakeRapl rapl;
  ScopedEnv env("ZEUS_RAPL_ROOT", rapl.root().string());
  device::rapl::RaplCpuSet cpus;
  rapl.set("intel-rapl:0", 6000);  // +5000 uJ since the set was made (it started at 1000)
  metrics::NodeSampler sampler(nullptr, &cpus, {.period = std::chrono::hours(1), .host = "n"});
  const std::string text = sampler.scrape();
  EXPECT_NEAR(*exposition_value(text,
                                "zeus_cpu_energy_joules_total{cpu=\"0\",name=\"package-0\","
                                "host=\"n\"}"),
              0.005, 1e-9);
  EXPECT_TRUE(exposition_value(text,
                               "zeus_dram_energy_joules_total{cpu=\"0\",name=\"package-0\","
                               "host=\"n\"}"));
  EXPECT_FALSE(exposition_value(text,
                                "zeus_dram_energy_joules_total{cpu=\"1\",name=\"package-1\","
                                "host=\"n\"}"))
      << "package 1 has no DRAM zone";
}

// The exporter's view of the device layer: the machine's GpuSet, opened from the registry as
// zeusd opens it, and the telemetry over it.
struct MachineTelemetry {
  std::unique_ptr<device::GpuSet> gpus =
      device::open_gpu_set("nvml", {.respect_visible_devices = false, .zeusd_from_env = false});
  metrics::GpuSetTelemetry telemetry{*gpus};
};

TEST(GpuSetTelemetry, ReadsWhatEachNvmlGpuHasOverTheFakeNvml) {
  FakeNvml nvml(four_a40s());
  nvml.set_gpu_value(0, "temperature_c", 61);
  nvml.set_gpu_value(0, "sm_clock_mhz", 1410);
  nvml.set_gpu_value(0, "mem_clock_mhz", 7251);
  nvml.set_gpu_value(0, "throttle_power_ns", 2'500'000'000ULL);
  nvml.set_gpu_value(0, "throttle_thermal_ns", 1'000'000ULL);
  nvml.set_gpu_value(1, "energy_counter", false);
  ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "1");  // the exporter shows every GPU of the machine
  MachineTelemetry machine;
  auto& telemetry = machine.telemetry;
  ASSERT_EQ(telemetry.count(), 4);
  EXPECT_EQ(telemetry.identity(2).uuid, four_a40s()[2].uuid);
  EXPECT_EQ(telemetry.identity(2).index, 2);
  const GpuReading a = telemetry.read(0);
  const double average_w = static_cast<double>(four_a40s()[0].power_mw) / 1000;
  EXPECT_EQ(a.power_w, average_w + 1) << "the instant field (the fake reads 1 W above the average)";
  EXPECT_EQ(a.power_limit_w, 300.0);
  EXPECT_EQ(a.power_limit_min_w, 100.0);
  EXPECT_EQ(a.power_limit_max_w, 300.0);
  EXPECT_EQ(a.temperature_c, 61.0);
  EXPECT_EQ(a.sm_clock_hz, 1410e6);
  EXPECT_EQ(a.memory_clock_hz, 7251e6);
  EXPECT_DOUBLE_EQ(*a.power_throttle_s, 2.5);
  EXPECT_DOUBLE_EQ(*a.thermal_throttle_s, 0.001);
  ASSERT_TRUE(a.energy_j);
  EXPECT_GE(*a.energy_j, 1000.0);
  const GpuReading b = telemetry.read(1);
  EXPECT_FALSE(b.temperature_c) << "no sensor: empty, not an error";
  EXPECT_FALSE(b.sm_clock_hz);
  EXPECT_FALSE(b.power_throttle_s);
  EXPECT_FALSE(b.energy_j) << "no counter: the sampler integrates";
  nvml.set_gpu_value(2, "faults", {{"read_error", kNvmlErrorGpuIsLost}});
  EXPECT_THROW(telemetry.read(2), DeviceLost);
  EXPECT_NO_THROW(telemetry.read(3));
}

TEST(GpuSetTelemetry, AnOldNvmlWithoutTheOptionalCallsStillGivesPowerAndLimits) {
  FakeNvml nvml(four_a40s(), /*minimal_library=*/true);
  nvml.set_gpu_value(0, "temperature_c", 61);
  MachineTelemetry machine;
  const GpuReading r = machine.telemetry.read(0);
  EXPECT_EQ(r.power_w, static_cast<double>(four_a40s()[0].power_mw) / 1000)
      << "nvmlDeviceGetPowerUsage: no field values in this library";
  EXPECT_EQ(r.power_limit_w, 300.0);
  EXPECT_FALSE(r.temperature_c);
  EXPECT_FALSE(r.energy_j);
}

http::Request get(const std::string& path, const std::string& auth = "") {
  http::Request r;
  r.method = "GET";
  r.path = path;
  if (!auth.empty()) {
    r.headers["authorization"] = auth;
  }
  return r;
}

TEST(MetricsRoute, ServesTheTextFormatAndRefusesEverythingElse) {
  metrics::NodeSampler sampler(nullptr, nullptr, {.host = "n"});
  const auto ok = exporter::handle_metrics_request(sampler, std::nullopt, get("/metrics"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(ok.body, HasSubstr("# TYPE zeus_gpu_power_watts gauge"));
  EXPECT_EQ(exporter::handle_metrics_request(sampler, std::nullopt, get("/other")).status, 404);
  http::Request post = get("/metrics");
  post.method = "POST";
  EXPECT_EQ(exporter::handle_metrics_request(sampler, std::nullopt, post).status, 405);
}

TEST(MetricsRoute, WithATokenOnlyTheBearerOfItReads) {
  metrics::NodeSampler sampler(nullptr, nullptr, {.host = "n"});
  const std::optional<std::string> token = "s3cret-token";
  EXPECT_EQ(exporter::handle_metrics_request(sampler, token, get("/metrics")).status, 401);
  EXPECT_EQ(exporter::handle_metrics_request(sampler, token, get("/metrics", "Bearer s3cret-tokeN"))
                .status,
            401);
  EXPECT_EQ(
      exporter::handle_metrics_request(sampler, token, get("/metrics", "Bearer s3cret")).status,
      401);
  EXPECT_EQ(
      exporter::handle_metrics_request(sampler, token, get("/metrics", "s3cret-token")).status,
      401);
  EXPECT_EQ(exporter::handle_metrics_request(sampler, token, get("/metrics", "Bearer s3cret-token"))
                .status,
            200);
}

TEST(MetricsRoute, ATokenFileOthersCanReadIsRefused) {
  TempDir dir;
  const auto path = dir.path() / "token";
  std::ofstream(path) << "  abc123 \n";
  ::chmod(path.c_str(), 0644);
  try {
    read_secret_file(path, "metrics token file");
    FAIL() << "a world-readable token file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr("chmod 600"));
  }
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(read_secret_file(path, "metrics token file"), "abc123");
  std::ofstream(path, std::ios::trunc) << "\n";
  EXPECT_THROW(read_secret_file(path, "metrics token file"), ConfigError);
  EXPECT_THROW(read_secret_file(dir.path() / "missing", "metrics token file"), ConfigError);
}

// A Kubernetes Secret volume: `token` is a symlink into `..data/` (the file itself mode 0400).
TEST(MetricsRoute, ATokenFromASecretVolumeIsReadThroughItsSymlink) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "..data");
  const auto file = dir.path() / "..data" / "token";
  std::ofstream(file) << "from-a-secret\n";
  ::chmod(file.c_str(), 0400);
  std::filesystem::create_symlink("..data/token", dir.path() / "token");
  EXPECT_EQ(read_secret_file(dir.path() / "token", "metrics token file"), "from-a-secret");
  ::chmod(file.c_str(), 0444);
  EXPECT_THROW(read_secret_file(dir.path() / "token", "metrics token file"), ConfigError);
}

TEST(MetricsServer, APortInUseIsNamed) {
  metrics::NodeSampler sampler(nullptr, nullptr, {.host = "n"});
  exporter::MetricsServer first(sampler, {.bind_address = "127.0.0.1:0"});
  try {
    exporter::MetricsServer second(sampler, {.bind_address = first.address()});
    FAIL() << "a second server bound " << first.address();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(first.address()));
  }
}

// Issue #52: a Secret rotated in place (the kubelet writes a new timestamped directory and swaps
// the "..data" symlink) is taken at the next scrape, without a restart; a rotation that cannot be
// read (a mode others can read) keeps the last token.
TEST(MetricsServer, ARotatedTokenIsTakenWithoutARestart) {
  TempDir dir;
  const auto secret_dir = [&](const std::string& name, const std::string& token, mode_t mode) {
    std::filesystem::create_directory(dir.path() / name);
    const auto file = dir.path() / name / "token";
    std::ofstream(file) << token << "\n";
    ::chmod(file.c_str(), mode);
    const auto tmp = dir.path() / "..data_tmp";
    std::filesystem::create_symlink(name, tmp);
    std::filesystem::rename(tmp, dir.path() / "..data");  // atomic, as the kubelet does
  };
  secret_dir("..2026_12_06_a", "first-token", 0400);
  std::filesystem::create_symlink("..data/token", dir.path() / "token");
  metrics::NodeSampler sampler(nullptr, nullptr, {.host = "n"});
  exporter::MetricsServer server(sampler,
                                 {.bind_address = "127.0.0.1:0", .token_file = dir / "token"});
  const std::string url = "http://" + server.address() + "/metrics";
  const auto status = [&](const std::string& token) {
    return http_call("GET", url, "", {"Authorization: Bearer " + token}).status;
  };
  EXPECT_EQ(status("first-token"), 200);
  secret_dir("..2026_12_06_b", "second-token", 0400);
  EXPECT_EQ(status("first-token"), 401) << "the old token ended with its rotation";
  EXPECT_EQ(status("second-token"), 200);
  secret_dir("..2026_12_06_c", "third-token", 0444);
  EXPECT_EQ(status("third-token"), 401) << "a token others may read is not taken";
  EXPECT_EQ(status("second-token"), 200) << "the last good token stays in use";
}

}  // namespace
}  // namespace zeus::test
