// Each GPU's series labelled with the pod that holds it: `zeus monitor --serve --kubelet-socket`
// over the fake NVML and a fake kubelet (the real pod-resources v1 protocol over gRPC), scraped
// by a real Prometheus and queried by `pod`.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metrics_support.h"
#include "support/fake_kubelet.h"

namespace zeus::test {
namespace {

using std::chrono::seconds;

TEST(PrometheusScrape, AGpusSeriesCarryThePodTheKubeletListsOnIt) {
  FakeNvml nvml(four_a40s());
  TempDir dir;
  FakeKubelet kubelet((dir / "kubelet.sock").string());
  kubelet.set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {four_a40s()[0].uuid}},
                    {"train-1", "ml", "pytorch", "nvidia.com/gpu", {four_a40s()[2].uuid}}});
  std::string address;
  std::unique_ptr<Child> monitor;
  for (int attempt = 0; attempt < 3 && !monitor; ++attempt) {
    address = fmt::format("127.0.0.1:{}", free_port());
    auto child = std::make_unique<Child>(std::vector<std::string>{
        ZEUS_CLI_PATH, "monitor", "--serve", address, "--interval", "100ms", "--duration", "120s",
        "--kubelet-socket", kubelet.socket_path()});
    if (eventually([&] { return http_call("GET", "http://" + address + "/metrics").status == 200; },
                   seconds(15))) {
      monitor = std::move(child);
    }
  }
  ASSERT_TRUE(monitor) << "zeus monitor --serve did not answer";
  // The exporter's own text: GPU 0 is train-0's; GPU 1 is nobody's (empty labels).
  ASSERT_TRUE(eventually(
      [&] {
        return http_call("GET", "http://" + address + "/metrics").body.find("pod=\"train-0\"") !=
               std::string::npos;
      },
      seconds(15)));
  std::string why;
  auto prometheus = PrometheusServer::start({address}, why);
  if (!prometheus) {
    ZEUS_SKIP_WITHOUT_SERVER(why);
  }
  const auto power =
      prometheus->query_until_series("zeus_gpu_power_watts{pod=\"train-0\"}", seconds(20));
  ASSERT_EQ(power.size(), 1u) << power.dump();
  EXPECT_EQ(power[0]["metric"]["gpu"], "0");
  EXPECT_EQ(power[0]["metric"]["namespace"], "ml");
  EXPECT_EQ(power[0]["metric"]["container"], "pytorch");
  const auto second = prometheus->query("zeus_gpu_power_watts{pod=\"train-1\"}");
  ASSERT_EQ(second.size(), 1u) << second.dump();
  EXPECT_EQ(second[0]["metric"]["gpu"], "2");
  const auto unused = prometheus->query("zeus_gpu_power_watts{pod=\"\"}");
  EXPECT_EQ(unused.size(), 2u) << "GPUs 1 and 3 belong to no pod: " << unused.dump();
}

}  // namespace
}  // namespace zeus::test
