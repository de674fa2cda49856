// The node exporter scraped by a real Prometheus (2.42, Debian's): `zeus monitor --serve` over
// the fake NVML, its series read back through Prometheus's query API, and a GPU failing
// mid-run.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>

#include "metrics_support.h"
#include "support/fake_amdsmi_machine.h"

namespace zeus::test {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

// `zeus monitor --serve` on a free port, ready once it printed where it serves.
std::unique_ptr<Child> start_monitor(std::string* address, const std::string& device = "auto") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    *address = fmt::format("127.0.0.1:{}", free_port());
    auto child = std::make_unique<Child>(
        std::vector<std::string>{ZEUS_CLI_PATH, "monitor", "--serve", *address, "--interval",
                                 "100ms", "--duration", "120s", "--device", device});
    if (eventually(
            [&] { return http_call("GET", "http://" + *address + "/metrics").status == 200; },
            seconds(15))) {
      return child;
    }
  }
  return nullptr;
}

TEST(PrometheusScrape, SeesTheFakeGpusPowerLimitsAndAFailingGpu) {
  FakeNvml nvml(four_a40s());
  nvml.set_gpu_value(0, "temperature_c", 61);
  nvml.set_gpu_value(1, "power_mw", 200'000);
  nvml.set_gpu_value(1, "limit_mw", 250'000);
  std::string address;
  auto monitor = start_monitor(&address);
  ASSERT_TRUE(monitor) << "zeus monitor --serve did not answer";
  std::string why;
  auto prometheus = PrometheusServer::start({address}, why);
  if (!prometheus) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }

  auto power = prometheus->query_until_series("zeus_gpu_power_watts", seconds(20));
  ASSERT_EQ(power.size(), 4u) << power.dump();
  EXPECT_EQ(series_value(power, {{"gpu", "0"}, {"uuid", four_a40s()[0].uuid}}),
            static_cast<double>(four_a40s()[0].power_mw) / 1000 + 1)
      << "NVML's instant power (the fake reads 1 W above its average)";
  EXPECT_EQ(series_value(power, {{"gpu", "1"}}), 201.0);
  const auto limits = prometheus->query("zeus_gpu_power_limit_watts");
  EXPECT_EQ(series_value(limits, {{"gpu", "1"}}), 250.0);
  EXPECT_EQ(series_value(limits, {{"gpu", "2"}}), 300.0);
  const auto temperature = prometheus->query("zeus_gpu_temperature_celsius");
  ASSERT_EQ(temperature.size(), 1u) << "only GPU 0 has the sensor: " << temperature.dump();
  EXPECT_EQ(series_value(temperature, {{"gpu", "0"}}), 61.0);
  // The energy counter grows at the fake's power. The exporter reads it on a period of its own,
  // not at the scrape, so the rate between two scrapes (irate) is off by how late the sampler ran
  // (10% on this 2-core machine under a test run); the slope fitted through 5 scrapes or more
  // (deriv: rate() extrapolates over a window still filling) averages that out.
  ASSERT_FALSE(
      prometheus
          ->query_until_series("count_over_time(zeus_gpu_energy_joules_total{gpu=\"1\"}[30s]) >= 5",
                               seconds(30))
          .empty());
  const auto rate = prometheus->query("deriv(zeus_gpu_energy_joules_total{gpu=\"1\"}[30s])");
  ASSERT_EQ(rate.size(), 1u) << rate.dump();
  EXPECT_NEAR(*series_value(rate, {}), 200.0, 10.0);

  // GPU 2 fails: its series go, the others stay, the scrape itself still succeeds.
  nvml.set_gpu_value(2, "faults", {{"read_error", 15}});
  EXPECT_TRUE(eventually(
      [&] {
        return series_value(prometheus->query("zeus_exporter_gpu_up"), {{"gpu", "2"}}) == 0.0;
      },
      seconds(20)));
  EXPECT_TRUE(eventually(
      [&] {
        return series_value(prometheus->query("zeus_exporter_read_errors_total"),
                            {{"device", "gpu2"}})
                   .value_or(0) > 0;
      },
      seconds(20)));
  EXPECT_TRUE(eventually(
      [&] {
        const auto now = prometheus->query("zeus_gpu_power_watts");
        return now.size() == 3 && !series_value(now, {{"gpu", "2"}});
      },
      seconds(20)));
  EXPECT_EQ(series_value(prometheus->query("up"), {{"job", "zeus"}}), 1.0)
      << "a failing GPU never fails the scrape";
  // The exporter served on; the monitor's own measurement ended with GPU 2, which it reports.
  monitor->kill(SIGINT);
  EXPECT_EQ(monitor->wait().exit_code, 1);
}

// The same families for AMD GPUs, in their units: socket power in W, caps from uW, the counter's
// energy; the exporter's `gpu` label is AMD SMI's index (upstream zeusd's GPU ids).
TEST(PrometheusScrape, SeesAmdGpusThroughAmdSmi) {
  std::vector<FakeAmdGpu> gpus = mi300xs(2);
  gpus[1].cap_uw = 600'000'000;
  gpus[1].temperature_c.reset();
  FakeAmdsmi amd(gpus);
  std::string address;
  auto monitor = start_monitor(&address, "amdsmi");
  ASSERT_TRUE(monitor) << "zeus monitor --serve --device amdsmi did not answer";
  std::string why;
  auto prometheus = PrometheusServer::start({address}, why);
  if (!prometheus) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }
  const auto power = prometheus->query_until_series("zeus_gpu_power_watts", seconds(20));
  ASSERT_EQ(power.size(), 2u) << power.dump();
  EXPECT_EQ(series_value(power, {{"gpu", "1"}, {"uuid", gpus[1].uuid}}), 310.0);
  const auto limits = prometheus->query("zeus_gpu_power_limit_watts");
  EXPECT_EQ(series_value(limits, {{"gpu", "1"}}), 600.0) << "600000000 uW";
  EXPECT_EQ(series_value(prometheus->query("zeus_gpu_power_limit_max_watts"), {{"gpu", "0"}}),
            750.0);
  const auto temperature = prometheus->query("zeus_gpu_temperature_celsius");
  ASSERT_EQ(temperature.size(), 1u) << "GPU 1 lacks the sensor: no series" << temperature.dump();
  EXPECT_EQ(series_value(temperature, {{"gpu", "0"}}), 45.0);
  const auto rate = prometheus->query_until_series(
      "irate(zeus_gpu_energy_joules_total{gpu=\"0\"}[5s])", seconds(20));
  ASSERT_EQ(rate.size(), 1u);
  EXPECT_NEAR(*series_value(rate, {}), 300.0, 30.0);
  monitor->kill(SIGINT);
  monitor->wait();
}

TEST(PrometheusScrape, MonitorServeRefusesAnAddressInUse) {
  FakeNvml nvml(four_a40s());
  std::string address;
  auto first = start_monitor(&address);
  ASSERT_TRUE(first);
  const ProcessResult second =
      run_process({ZEUS_CLI_PATH, "monitor", "--serve", address, "--duration", "1s"});
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_THAT(second.err, HasSubstr(address));
  first->kill(SIGINT);
  first->wait();
}

// The exporter DaemonSet's token (a Secret mounted at mode 0400): a scrape without it is 401.
TEST(PrometheusScrape, MonitorServeWithATokenFileAnswersOnlyScrapesCarryingIt) {
  FakeNvml nvml(four_a40s());
  TempDir dir;
  const auto token = dir / "token";
  std::ofstream(token) << "s3cret\n";
  ::chmod(token.c_str(), 0644);
  const std::string address = fmt::format("127.0.0.1:{}", free_port());
  const ProcessResult open =
      run_process({ZEUS_CLI_PATH, "monitor", "--serve", address, "--metrics-token-file",
                   token.string(), "--duration", "1s"});
  EXPECT_EQ(open.exit_code, 2) << "a token others can read is refused";
  EXPECT_THAT(open.err, HasSubstr(token.string()));
  ::chmod(token.c_str(), 0400);
  Child monitor({ZEUS_CLI_PATH, "monitor", "--serve", address, "--metrics-token-file",
                 token.string(), "--interval", "100ms", "--duration", "60s"});
  ASSERT_TRUE(eventually(
      [&] {
        return http_call("GET", "http://" + address + "/metrics", "",
                         {"Authorization: Bearer s3cret"})
                   .status == 200;
      },
      seconds(15)));
  EXPECT_EQ(http_call("GET", "http://" + address + "/metrics").status, 401);
  EXPECT_EQ(http_call("GET", "http://" + address + "/metrics", "", {"Authorization: Bearer s3cre"})
                .status,
            401);
  monitor.kill(SIGINT);
  monitor.wait();
}

}  // namespace
}  // namespace zeus::test
