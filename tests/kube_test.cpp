// The kubelet's pod-resources API against a fake kubelet speaking the real v1 protocol: which
// pod holds which GPU (NVIDIA's UUIDs and AMD's PCI addresses, in any case), kept fresh on a
// thread; a kubelet that goes away is logged once, the last map kept for a while then dropped,
// and readers never wait for it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "support/fake_kubelet.h"
#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/kube/device_ids.h"
#include "zeus/kube/pod_identity.h"
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

// Issue #52: several pods on one GPU (time-slicing and MPS replicas "GPU-...::N", MIG devices)
// are all named on that GPU, not collapsed into one or lost.
TEST(PodResources, ReplicasAndMigDevicesNameEveryPodOnTheirGpu) {
  test::TempDir dir;
  const std::string sock = (dir / "kubelet.sock").string();
  test::FakeKubelet kubelet(sock);
  const std::string mig = "MIG-11111111-2222-3333-4444-555555555555";
  kubelet.set_pods({{"b-0", "ml", "train", "nvidia.com/gpu", {std::string(kGpu0) + "::1"}},
                    {"a-0", "ml", "train", "nvidia.com/gpu", {std::string(kGpu0) + "::0"}},
                    {"mig-0", "dev", "nb", "nvidia.com/mig-1g.10gb", {mig}}});
  WatcherOptions options{.period = 50ms};
  options.mig_parent = [&](std::string_view uuid) -> std::optional<std::string> {
    return uuid == mig ? std::optional<std::string>(kGpu1) : std::nullopt;
  };
  PodResourcesWatcher watcher(sock, options);
  ASSERT_TRUE(watcher.refresh());
  EXPECT_EQ(watcher.owner_of_gpu(kGpu0, ""), (DeviceOwner{"a-0,b-0", "ml,ml", "train,train"}));
  EXPECT_EQ(watcher.owner_of_gpu(kGpu1, "")->pod, "mig-0") << "the MIG resource is a GPU's";
  PodResourcesWatcher blind(sock, {.period = 50ms});
  ASSERT_TRUE(blind.refresh());
  EXPECT_EQ(blind.owner_of_gpu(kGpu1, ""), std::nullopt) << "no resolver: no parent";
}

TEST(PodResources, MergedOwnersAreSortedAndUnique) {
  EXPECT_EQ(merge_owners({{"b", "ml", "c"}, {"a", "ml", "c"}, {"b", "ml", "c"}}),
            (DeviceOwner{"a,b", "ml,ml", "c,c"}));
  EXPECT_EQ(merge_owners({{"x", "ns", "c"}}), (DeviceOwner{"x", "ns", "c"}));
}

TEST(DeviceIds, EveryNameIsReducedToItsPhysicalGpu) {
  const MigParent parent = [](std::string_view uuid) -> std::optional<std::string> {
    return uuid == "MIG-ab" ? std::optional<std::string>("GPU-Parent") : std::nullopt;
  };
  EXPECT_EQ(gpu_key_of_device("GPU-AbC", parent), "gpu-abc");
  EXPECT_EQ(gpu_key_of_device("GPU-abc::3", parent), "gpu-abc");
  EXPECT_EQ(gpu_key_of_device("MIG-ab", parent), "gpu-parent");
  EXPECT_EQ(gpu_key_of_device("mig-ab::0", parent), "gpu-parent") << "as a lower-cased key";
  EXPECT_EQ(gpu_key_of_device("MIG-cd", parent), std::nullopt);
  EXPECT_EQ(gpu_key_of_device("0000:C1:00.0", parent), "0000:c1:00.0");
  EXPECT_TRUE(is_gpu_resource("nvidia.com/gpu"));
  EXPECT_TRUE(is_gpu_resource("amd.com/gpu"));
  EXPECT_TRUE(is_gpu_resource("nvidia.com/mig-1g.10gb"));
  EXPECT_FALSE(is_gpu_resource("example.com/nic"));
  EXPECT_FALSE(is_gpu_resource("hugepages-2Mi"));
}

TEST(PodIdentity, APodIsItsCgroupsUidInEitherDriversSpelling) {
  const std::string uid = "8b4b0c3e-1111-4222-8333-944444444444";
  // cgroup v1, the cgroupfs driver
  EXPECT_EQ(pod_uid_of_cgroup("12:pids:/kubepods/besteffort/pod" + uid +
                              "/0123abcd\n4:memory:/kubepods/besteffort/pod" + uid + "/0123abcd\n"),
            uid);
  // cgroup v2, the systemd driver (underscores), in a kind node's nesting
  EXPECT_EQ(
      pod_uid_of_cgroup("0::/kubelet.slice/kubelet-kubepods.slice/"
                        "kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod"
                        "8B4B0C3E_1111_4222_8333_944444444444.slice/cri-containerd-ab.scope\n"),
      uid);
  EXPECT_EQ(pod_uid_of_cgroup("0::/kubepods/pod" + uid + "\n"), uid) << "guaranteed QoS";
  EXPECT_EQ(pod_uid_of_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n"), std::nullopt);
  EXPECT_EQ(pod_uid_of_cgroup("0::/system.slice/pod" + uid + "/x\n"), std::nullopt)
      << "not under kubepods";
  EXPECT_EQ(pod_uid_of_cgroup("0::/kubepods/podnot-a-uid/x\n"), std::nullopt);
  EXPECT_EQ(pod_uid_of_process(::getpid()), std::nullopt) << "this test runs in no pod";
}

TEST(PodIdentity, TheKubeletsCheckpointListsEachPodsGpusInEitherShape) {
  const auto pods = parse_device_checkpoint(R"({"Data": {"PodDeviceEntries": [
      {"PodUID": "AAA", "ContainerName": "c", "ResourceName": "nvidia.com/gpu",
       "DeviceIDs": {"0": ["GPU-1"], "1": ["GPU-2::0"]}, "AllocResp": "eA=="},
      {"PodUID": "bbb", "ContainerName": "d", "ResourceName": "nvidia.com/gpu",
       "DeviceIDs": ["GPU-3"]},
      {"PodUID": "bbb", "ContainerName": "d", "ResourceName": "example.com/nic",
       "DeviceIDs": ["nic-0"]}],
      "RegisteredDevices": {"nvidia.com/gpu": ["GPU-1", "GPU-2::0", "GPU-3"]}}, "Checksum": 7})",
                                            "ckpt");
  ASSERT_EQ(pods.size(), 2u);
  EXPECT_EQ(pods.at("aaa")[0].device_ids, (std::vector<std::string>{"GPU-1", "GPU-2::0"}));
  ASSERT_EQ(pods.at("bbb").size(), 1u) << "only GPU resources";
  EXPECT_EQ(pods.at("bbb")[0].device_ids, (std::vector<std::string>{"GPU-3"}));
  for (const char* bad : {"", "{}", R"({"Data": {"PodDeviceEntries": [{"PodUID": 1}]}})",
                          R"({"Data": {"PodDeviceEntries": [{"PodUID": "a", "ResourceName":
                          "nvidia.com/gpu", "DeviceIDs": 3}]}})"}) {
    EXPECT_THROW(parse_device_checkpoint(bad, "ckpt"), ConfigError) << bad;
  }
  try {
    parse_device_checkpoint("{", "/var/lib/kubelet/x");
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/var/lib/kubelet/x"));
  }
}

}  // namespace
}  // namespace zeus::kube
