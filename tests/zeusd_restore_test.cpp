// zeusd's restore rule (Note [restore rule] in docs/zeusd.md): a lease whose restore fails stays
// in the journal, is retried with a backoff, counted in the metrics, and is never dropped; a GPU
// that is gone keeps its lease for the next start.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "metrics_support.h"
#include "support/http_client.h"
#include "zeus/common/atomic_file.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

// The audit's events of `kind` for `gpu`.
int audited(const ZeusdProcess& daemon, const std::string& kind, int gpu) {
  std::ifstream audit(daemon.state_dir() / "audit.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(audit, line)) {
    const auto j = nlohmann::json::parse(line);
    n += j.value("event", "") == kind && j.value("gpu", -1) == gpu ? 1 : 0;
  }
  return n;
}

TEST(ZeusdRestore, AFailedRestoreStaysInTheJournalAndIsRetriedUntilItReadsBack) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(dir, {"--metrics-bind-address", address, "--metrics-period-ms", "50"});
  auto holder = client_as(kUserA, daemon, {"POST", set_limit(0, 200'000)}, true);
  ASSERT_EQ(nvml.limit_mw(0), 200'000);

  nvml.set_gpu_value(0, "faults", {{"set_error", kNvmlErrorUnknown}});
  holder->kill(SIGKILL);
  holder->wait();
  ASSERT_TRUE(eventually([&] { return audited(daemon, "restore_failed", 0) >= 2; }, seconds(10)))
      << "the failed restore is retried";
  EXPECT_EQ(nvml.limit_mw(0), 200'000);
  const auto leases = journal(daemon)["leases"];
  ASSERT_EQ(leases.size(), 1u) << "a restore that failed is never dropped: " << leases.dump();
  EXPECT_TRUE(leases[0]["restore_pending"].get<bool>());
  EXPECT_EQ(leases[0]["original"], 300'000);

  const std::string text = http_call("GET", "http://" + address + "/metrics", "", {}).body;
  const auto failures = exposition_value(
      text, fmt::format("zeus_restore_failures_total{{host=\"{}\"}}", host_name()));
  ASSERT_TRUE(failures) << text;
  EXPECT_GE(*failures, 2.0);
  EXPECT_EQ(
      exposition_value(text, fmt::format("zeus_restores_pending{{host=\"{}\"}}", host_name())),
      1.0);

  auto other = client_as(kUserB, daemon, {"POST", set_limit(0, 250'000)}, false);
  EXPECT_THAT(other->wait().out, HasSubstr("status=409")) << "the GPU waits for its restore";

  nvml.set_gpu_value(0, "faults", nlohmann::json::object());
  EXPECT_TRUE(eventually([&] { return nvml.limit_mw(0) == 300'000; }, seconds(15)))
      << "a retry within the 10 s cap restores it once the GPU takes it";
  EXPECT_TRUE(eventually([&] { return journal(daemon)["leases"].empty(); }, seconds(5)));
  // The audit line is written before the journal drops the lease, so it is there by now.
  EXPECT_EQ(audited(daemon, "restore", 0), 1);
}

TEST(ZeusdRestore, AGpuThatIsGoneKeepsItsLeaseForTheNextStart) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto holder = client_as(kUserA, daemon, {"POST", set_limit(1, 180'000)}, true);
  nvml.set_gpu_value(1, "faults", {{"set_error", kNvmlErrorGpuIsLost}});
  holder->kill(SIGKILL);
  holder->wait();
  ASSERT_TRUE(eventually([&] { return audited(daemon, "restore_failed", 1) == 1; }, seconds(10)));
  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(audited(daemon, "restore_failed", 1), 1) << "a lost GPU is not retried in this run";
  EXPECT_EQ(journal(daemon)["leases"].size(), 1u);

  daemon.kill9();
  nvml.set_gpu_value(1, "faults", nlohmann::json::object());  // the GPU is back after a reset
  daemon.start();
  EXPECT_TRUE(eventually([&] { return nvml.limit_mw(1) == 300'000; }, seconds(10)))
      << "the next start restores what the last one could not";
  EXPECT_TRUE(journal(daemon)["leases"].empty());
}

}  // namespace
}  // namespace zeus::test
