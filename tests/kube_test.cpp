// The kubelet's pod-resources API against a fake kubelet speaking the real v1 protocol: which
// pod holds which GPU, kept fresh on a thread; a kubelet that goes away is logged once, the last
// map kept, and readers never wait for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  test::TempDir dir;
  test::FakeKubelet kubelet((dir / "kubelet.sock").string());
  kubelet.set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {kGpu0}},
                    {"cache", "ml", "redis", "example.com/nic", {"nic-1"}}});
  const DeviceOwners owners = list_device_owners(kubelet.socket_path(), 2s);
  ASSERT_EQ(owners.size(), 1u);  // only GPU resources
  EXPECT_EQ(owners.at(kGpu0), (DeviceOwner{"train-0", "ml", "pytorch"}));
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

TEST(PodResources, TheWatcherFollowsThePodsAndKeepsTheLastMapWhenTheKubeletGoes) {
  test::TempDir dir;
  const std::string sock = (dir / "kubelet.sock").string();
  auto kubelet = std::make_unique<test::FakeKubelet>(sock);
  kubelet->set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {kGpu0}}});
  PodResourcesWatcher watcher(sock, 50ms);
  wait_until([&] { return watcher.owner(kGpu0).has_value(); }, 5s);
  EXPECT_EQ(watcher.owner(kGpu0)->pod, "train-0");
  EXPECT_EQ(watcher.owner(kGpu1), std::nullopt);  // no pod: no owner
  kubelet->set_pods({{"train-1", "ml", "pytorch", "nvidia.com/gpu", {kGpu1}}});
  wait_until([&] { return watcher.owner(kGpu1).has_value(); }, 5s);
  EXPECT_EQ(watcher.owner(kGpu0), std::nullopt);  // the first pod ended
  kubelet.reset();                                // the kubelet goes away
  wait_until([&] { return watcher.failures() > 0; }, 5s);
  EXPECT_EQ(watcher.owner(kGpu1)->pod, "train-1");  // the last map stays
}

}  // namespace
}  // namespace zeus::kube
