// The kubelet's pod-resources API against a fake kubelet speaking the real v1 protocol: which
// pod holds which GPU (NVIDIA's UUIDs and AMD's PCI addresses, in any case), kept fresh on a
// thread; a kubelet that goes away is logged once, the last map kept for a while then dropped,
// and readers never wait for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "support/fake_kubelet.h"
#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::kube {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Polls `done` every 10 ms up to `timeout`; fails the test when it never holds.
template <typename F>
void wait_until(F done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
    std::this_thread::sleep_for(10ms);
  }
}

constexpr const char* kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
constexpr const char* kGpu1 = "GPU-00000000-0000-0000-0000-000000000001";

TEST(PodResources, ListsWhichPodHoldsWhichGpu) {
  ASSERT_TRUE(pod_resources_supported());
  test::TempDir dir;
  test::FakeKubelet kubelet((dir / "kubelet.sock").string());
  kubelet.set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {kGpu0}},
                    {"rocm-0", "ml", "trainer", "amd.com/gpu", {"0000:C1:00.0"}},
                    {"cache", "ml", "redis", "example.com/nic", {"nic-1"}}});
  const DeviceOwners owners = list_device_owners(kubelet.socket_path(), 2s);
  ASSERT_EQ(owners.size(), 2u);  // only GPU resources, keyed in lower case
  EXPECT_EQ(owners.at("gpu-00000000-0000-0000-0000-000000000000"),
            (DeviceOwner{"train-0", "ml", "pytorch"}));
  EXPECT_EQ(owners.at("0000:c1:00.0"), (DeviceOwner{"rocm-0", "ml", "trainer"}));
}

TEST(PodResources, AGpuIsFoundByItsUuidOrItsPciAddressInAnyCase) {
  test::TempDir dir;
  const std::string sock = (dir / "kubelet.sock").string();
  test::FakeKubelet kubelet(sock);
  kubelet.set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {kGpu0}},
                    {"rocm-0", "ml", "trainer", "amd.com/gpu", {"0000:C1:00.0"}}});
  PodResourcesWatcher watcher(sock, {.period = 50ms});
  ASSERT_TRUE(watcher.refresh());
  EXPECT_EQ(watcher.owner_of_gpu(kGpu0, "0000:01:00.0")->pod, "train-0");
  EXPECT_EQ(watcher.owner_of_gpu("AMD-0000:c1:00.0", "0000:c1:00.0")->pod, "rocm-0");
  EXPECT_EQ(watcher.owner_of_gpu(kGpu1, ""), std::nullopt);
  EXPECT_EQ(owner_labels(watcher.owner(kGpu0)),
            (std::vector<std::pair<std::string, std::string>>{
                {"pod", "train-0"}, {"namespace", "ml"}, {"container", "pytorch"}}));
  EXPECT_EQ(owner_labels(std::nullopt), (std::vector<std::pair<std::string, std::string>>{
                                            {"pod", ""}, {"namespace", ""}, {"container", ""}}));
}

TEST(PodResources, AnAbsentKubeletIsAnIoErrorNamingTheSocket) {
  test::TempDir dir;
  try {
    list_device_owners((dir / "nobody.sock").string(), 500ms);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nobody.sock"));
  }
}

TEST(PodResources, TheWatcherFollowsThePodsAndForgetsThemOnlyAfterTheKubeletStaysAway) {
  test::TempDir dir;
  const std::string sock = (dir / "kubelet.sock").string();
  auto kubelet = std::make_unique<test::FakeKubelet>(sock);
  kubelet->set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {kGpu0}}});
  std::atomic<int> answers{0};
  PodResourcesWatcher watcher(
      sock, {.period = 50ms, .forget_after = 1500ms, .on_answer = [&](const DeviceOwners& owners) {
               answers += owners.empty() ? 0 : 1;
             }});
  wait_until([&] { return watcher.owner(kGpu0).has_value(); }, 5s);
  EXPECT_EQ(watcher.owner(kGpu0)->pod, "train-0");
  EXPECT_EQ(watcher.owner(kGpu1), std::nullopt);  // no pod: no owner
  kubelet->set_pods({{"train-1", "ml", "pytorch", "nvidia.com/gpu", {kGpu1}}});
  wait_until([&] { return watcher.owner(kGpu1).has_value(); }, 5s);
  EXPECT_EQ(watcher.owner(kGpu0), std::nullopt);  // the first pod ended
  EXPECT_GE(answers.load(), 2) << "each answer reaches on_answer";
  kubelet.reset();  // the kubelet goes away
  wait_until([&] { return watcher.failures() > 0; }, 5s);
  EXPECT_EQ(watcher.owner(kGpu1)->pod, "train-1");  // a short outage keeps the last map
  wait_until([&] { return !watcher.owner(kGpu1).has_value(); }, 10s);  // a long one drops it
}

}  // namespace
}  // namespace zeus::kube
