// A training job's pushed state, in a real Pushgateway (1.5, Debian's); and pushes that cannot
// get through, which training must never wait for.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>

#include "metrics_support.h"
#include "support/sim_job.h"
#include "zeus/common/errors.h"
#include "zeus/job/collectives.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/job_metrics.h"
#include "zeus/metrics/pushgateway.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;

TEST(JobPush, TheJobsStateIsInThePushgatewayAfterEachEpochAndAtTheEnd) {
  std::string why;
  auto gateway = PushgatewayServer::start(why);
  if (!gateway) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }
  TempDir dir;
  job::JobOptions o = quick_sim_job(dir / "log");
  o.job_id = "resnet nightly #7";  // a space and a #: sent base64-encoded
  o.pushgateway_url = gateway->url();
  job::SingleProcess world;
  const std::string group = "{instance=\"\",job=\"resnet nightly #7\"}";
  {
    job::EnergyJob job(job::resolve_job_options(o, 3, 16, 1), world);
    ASSERT_EQ(job.next_epoch(), 0);
    run_epoch(job, 30, 5, 0.5);
    ASSERT_EQ(job.next_epoch(), 1);
    // The state after epoch 1 is pushed off this thread: it arrives shortly.
    std::string text;
    ASSERT_TRUE(eventually(
        [&] {
          text = gateway->metrics();
          return exposition_value(text, "zeus_job_epoch" + group) == 1.0;
        },
        std::chrono::seconds(10)))
        << text;
    EXPECT_EQ(exposition_value(text,
                               "zeus_job_phase{instance=\"\",job=\"resnet nightly #7\","
                               "phase=\"optimal\"}"),
              1.0)
        << "the 30-step epoch profiled every limit";
    EXPECT_EQ(exposition_value(text, "zeus_job_optimal_power_limit_watts" + group),
              static_cast<double>(*job.optimal_power_limit_mw()) / 1000);
    EXPECT_EQ(exposition_value(text, "zeus_job_max_power_limit_watts" + group), 250.0)
        << "the simulated V100's highest limit";
    EXPECT_GT(*exposition_value(text, "zeus_job_energy_joules" + group), 0.0);
    EXPECT_TRUE(exposition_value(text, "zeus_job_next_epoch_cost" + group)) << "a forecast exists";
    EXPECT_EQ(exposition_value(text, "zeus_job_cost_threshold" + group),
              std::numeric_limits<double>::infinity());
    run_epoch(job, 30, 5, 0.6);
    ASSERT_EQ(job.next_epoch(), 2);
    run_epoch(job, 30, 5, 0.7);
    EXPECT_EQ(job.next_epoch(), std::nullopt) << "max epochs";
    ASSERT_TRUE(job.result());
    // The end of the job flushed its last state before next_epoch() returned.
    text = gateway->metrics();
    EXPECT_EQ(exposition_value(text, "zeus_job_epoch" + group), 3.0);
    EXPECT_EQ(exposition_value(text, "zeus_job_finished" + group), 1.0);
    EXPECT_NEAR(*exposition_value(text, "zeus_job_energy_joules" + group), job.result()->energy_j,
                1e-6 * job.result()->energy_j);
    EXPECT_NEAR(*exposition_value(text, "zeus_job_cost" + group), job.result()->cost,
                1e-6 * job.result()->cost);
  }
}

// A Pushgateway that accepts connections and never answers: pushes hand over and return while
// the send hangs (each would fail only after the 1 s timeout); the destructor gives up on it.
TEST(JobPush, PushesNeverWaitForAGatewayThatHangs) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url = fmt::format("http://127.0.0.1:{}", ntohs(addr.sin_port));
  {
    metrics::Pusher pusher({url, "stuck", std::chrono::milliseconds(1000)});
    for (int epoch = 0; epoch < 5; ++epoch) {
      job::JobState s;
      s.epochs_done = epoch;
      pusher.push(job::job_families(s));
    }
    EXPECT_EQ(pusher.sent() + pusher.failed(), 0u)
        << "every push returned while the first send still hangs";
  }
  ::close(listener);
}

TEST(JobPush, AnUnreachableGatewayFailsPushesNotTheJob) {
  TempDir dir;
  job::JobOptions o = quick_sim_job(dir / "log");
  o.pushgateway_url = fmt::format("http://127.0.0.1:{}", free_port());  // nothing listens
  job::SingleProcess world;
  job::EnergyJob job(job::resolve_job_options(o, 2, 16, 1), world);
  ASSERT_EQ(job.next_epoch(), 0);
  run_epoch(job, 30, 5, 0.5);
  ASSERT_EQ(job.next_epoch(), 1);
  run_epoch(job, 30, 5, 0.6);
  EXPECT_EQ(job.next_epoch(), std::nullopt);
  EXPECT_TRUE(job.result());
}

TEST(JobPush, ABadUrlOrJobIdIsNamedBeforeTraining) {
  EXPECT_THROW(metrics::pushgateway_group_url({"127.0.0.1:9091", "j"}), ConfigError);
  EXPECT_THROW(metrics::pushgateway_group_url({"http://h:9091", ""}), ConfigError);
  EXPECT_EQ(metrics::pushgateway_group_url({"http://h:9091/", "bert-1.2"}),
            "http://h:9091/metrics/job/bert-1.2");
  EXPECT_EQ(metrics::pushgateway_group_url({"http://h:9091", "a/b"}),
            "http://h:9091/metrics/job@base64/YS9i");
  TempDir dir;
  job::JobOptions o = quick_sim_job(dir / "log");
  o.pushgateway_url = "localhost:9091";
  job::SingleProcess world;
  try {
    job::EnergyJob job(job::resolve_job_options(o, 2, 16, 1), world);
    FAIL() << "a URL without a scheme was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("localhost:9091"));
    EXPECT_THAT(e.what(), HasSubstr("ZEUS_PUSHGATEWAY_URL"));
  }
}

}  // namespace
}  // namespace zeus::test
