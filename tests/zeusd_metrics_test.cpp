// zeusd --metrics-bind-address: the node's metrics beside the API, with the daemon's leases as
// the holder series, optionally behind a bearer token.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "metrics_support.h"
#include "support/http_client.h"
#include "support/sim_job.h"
#include "zeus/common/posix.h"
#include "zeus/job/collectives.h"
#include "zeus/job/energy_job.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ZeusdMetrics, ServesTheNodeAndNamesWhoHoldsALimit) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  nvml.set_gpu_value(0, "temperature_c", 55);
  SharedDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(dir, {"--metrics-bind-address", address, "--metrics-period-ms", "50"});
  std::string text = scrape(address);
  EXPECT_THAT(text, HasSubstr("# TYPE zeus_gpu_limit_holder_info gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("zeus_gpu_limit_holder_info{")));
  EXPECT_THAT(text, HasSubstr("zeus_gpu_temperature_celsius{gpu=\"0\""));

  auto holder =
      client_as(kUserA, daemon,
                {"POST", "/gpu/set_power_limit?gpu_ids=1&block=true&power_limit_mw=200000"}, true);
  const std::string series =
      fmt::format("zeus_gpu_limit_holder_info{{gpu=\"1\",uuid=\"{}\",host=", four_a40s()[1].uuid);
  EXPECT_TRUE(eventually(
      [&] {
        text = scrape(address);
        return text.find("zeus_gpu_power_limit_watts{gpu=\"1\"") != std::string::npos &&
               text.find(series) != std::string::npos;
      },
      seconds(10)))
      << text;
  EXPECT_THAT(text,
              HasSubstr(fmt::format("setting=\"power_limit\",pid=\"{}\",uid=\"{}\",job=\"\"}} 1",
                                    holder->pid(), kUserA)));
  EXPECT_TRUE(eventually(
      [&] {
        return exposition_value(scrape(address),
                                fmt::format("zeus_gpu_power_limit_watts{{gpu=\"1\",uuid=\"{}\","
                                            "name=\"NVIDIA A40\",host=\"{}\"}}",
                                            four_a40s()[1].uuid, host_name())) == 200.0;
      },
      seconds(5)))
      << "the limit the holder set";
  EXPECT_EQ(nvml.limit_mw(1), 200'000);

  holder->kill(SIGKILL);
  holder->wait();
  EXPECT_TRUE(
      eventually([&] { return scrape(address).find(series) == std::string::npos; }, seconds(10)))
      << "the holder is gone once its lease ended";
}

TEST(ZeusdMetrics, WithATokenFileAScrapeMustCarryIt) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  const auto token = dir / "metrics.token";
  std::ofstream(token) << "scrape-me-7\n";
  ::chmod(token.c_str(), 0600);
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(dir,
                      {"--metrics-bind-address", address, "--metrics-token-file", token.string()});
  EXPECT_EQ(scrape(address), "HTTP 401");
  EXPECT_EQ(scrape(address, {"Authorization: Bearer wrong"}), "HTTP 401");
  EXPECT_THAT(scrape(address, {"Authorization: Bearer scrape-me-7"}),
              HasSubstr("zeus_gpu_power_watts{gpu=\"3\""));
}

// examples/grafana/zeus-dashboard.json against a real Prometheus: zeusd's metrics (a job
// holding a limit, RAPL packages, every GPU sensor) and a job's pushed state; every query of
// every panel must parse and return series (Grafana itself is not packaged for Debian or PyPI).
TEST(ZeusdMetrics, EveryDashboardQueryReturnsSeries) {
  ZEUSD_SKIP_UNLESS_ROOT();
  std::string why;
  auto gateway = PushgatewayServer::start(why);
  if (!gateway) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  for (int gpu = 0; gpu < 4; ++gpu) {
    nvml.set_gpu_value(gpu, "temperature_c", 50 + gpu);
    nvml.set_gpu_value(gpu, "sm_clock_mhz", 1410);
    nvml.set_gpu_value(gpu, "throttle_power_ns", 1'000'000);
    nvml.set_gpu_value(gpu, "throttle_thermal_ns", 0);
  }
  FakeRapl rapl;
  ScopedEnv rapl_env("ZEUS_RAPL_ROOT", rapl.root().string());
  SharedDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(dir, {"--metrics-bind-address", address, "--metrics-period-ms", "200"});
  auto holder =
      client_as(kUserA, daemon,
                {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=200000"}, true);
  auto prometheus = PrometheusServer::start({address}, why, "", {gateway->url().substr(7)});
  if (!prometheus) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }

  // A job pushing its state: two epochs of three, then the third runs while Prometheus scrapes.
  TempDir log;
  job::JobOptions o = quick_sim_job(log / "log");
  o.job_id = "dashboard-job";
  o.pushgateway_url = gateway->url();
  o.cost_threshold = 1e12;
  job::SingleProcess world;
  job::EnergyJob job(job::resolve_job_options(o, 3, 16, 1), world);
  for (int epoch = 0; epoch < 2; ++epoch) {
    ASSERT_EQ(job.next_epoch(), epoch);
    job.begin_train_epoch(30);
    for (int i = 0; i < 30; ++i) {
      job.train_step_begin();
      job.train_step_end();
    }
    job.end_train_epoch();
    job.report_metric(0.5);
  }
  ASSERT_EQ(job.next_epoch(), 2);

  std::ifstream in(std::string(ZEUS_SOURCE_DIR) + "/examples/grafana/zeus-dashboard.json");
  const auto dashboard = nlohmann::json::parse(in);
  int queries = 0;
  for (const auto& panel : dashboard.at("panels")) {
    if (panel.at("type") == "row") {
      continue;
    }
    for (const auto& target : panel.at("targets")) {
      std::string expr = target.at("expr");
      expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "5s");
      expr = std::regex_replace(expr, std::regex(R"(\$(host|job)\b)"), ".*");
      const auto result = prometheus->query_until_series(expr, seconds(30));
      EXPECT_FALSE(result.empty()) << "panel '" << panel.at("title").get<std::string>()
                                   << "': " << expr << " returned no series";
      ++queries;
    }
  }
  EXPECT_GE(queries, 15);
  holder->kill(SIGKILL);
  holder->wait();
}

}  // namespace
}  // namespace zeus::test
