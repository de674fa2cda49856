// zeusd as Kubernetes deploys it (issue #52): a pod's NVML sees only its GPUs, numbered from 0,
// while zeusd sees the node's; the pod's processes run in a PID namespace of their own, as root
// or as another uid, and are SIGKILLed (OOM, preemption, deletion); zeusd may itself run in a
// PID namespace of its own (a DaemonSet without hostPID). Each test runs client and daemon in
// separate PID namespaces (unshare --pid) over the fake NVML machine.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "zeus/common/atomic_file.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr int64_t kMax = 300'000;

std::vector<FakeGpu> eight_a40s() {
  std::vector<FakeGpu> gpus(8);
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].uuid = fmt::format("GPU-0000000{}-1111-2222-3333-444444444444", i);
  }
  gpus[6].mig_uuids = {"MIG-66666666-1111-2222-3333-444444444444"};
  return gpus;
}

// How long after `since` GPU `gpu` read `mw`; std::nullopt when not within `deadline`.
std::optional<milliseconds> limit_back_after(const FakeNvml& nvml, int gpu, int64_t mw,
                                             std::chrono::steady_clock::time_point since,
                                             seconds deadline = seconds(5)) {
  while (std::chrono::steady_clock::now() - since < deadline) {
    if (nvml.limit_mw(gpu) == mw) {
      return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - since);
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return std::nullopt;
}

// SIGKILL of a pod's processes: the namespace's first process, and with it every other.
std::chrono::steady_clock::time_point kill_pod(Child& pod) {
  const auto at = std::chrono::steady_clock::now();
  kill_pid_namespace(pod);
  return at;
}

// The GPU identity finding: the pod holds the node's GPUs 4 and 5 and calls them 0 and 1; its job
// (a PowerLimitGuard over `nvml`, as every zeus-cpp job sets limits) must land on 4 and 5 only.
TEST(ZeusdPods, APodsJobSetsItsOwnGpusFoundByUuidAndNoOthers) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(eight_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto env = daemon.client_env();
  env["FAKE_NVML_VISIBLE_UUIDS"] = fmt::format("{},{}", eight_a40s()[4].uuid, eight_a40s()[5].uuid);
  const std::string journal_path = (dir.scratch() / "guard.json").string();
  auto job = start_as(kUserA, {ZEUS_LIMIT_SETTER_PATH, "nvml", journal_path, "200000", "150000"},
                      env, {.own_pid_namespace = true});
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(nvml.limit_mw(g), g == 4 ? 200'000 : g == 5 ? 150'000 : kMax) << "GPU " << g;
  }
  for (const auto& [gpu, mw] : nvml.limit_history()) {
    EXPECT_TRUE(gpu == 4 || gpu == 5) << "GPU " << gpu << " was set to " << mw;
  }
  const auto killed = kill_pod(*job);
  const auto back4 = limit_back_after(nvml, 4, kMax, killed);
  const auto back5 = limit_back_after(nvml, 5, kMax, killed);
  ASSERT_TRUE(back4 && back5);
  EXPECT_LT(std::max(*back4, *back5), milliseconds(1000));
  for (const auto& [gpu, mw] : nvml.limit_history()) {
    EXPECT_TRUE(gpu == 4 || gpu == 5) << "GPU " << gpu << " was set to " << mw;
  }
}

// Leases for root and for other PID namespaces: a root pod (the default) and a non-root one,
// each in its own PID namespace, set a limit and are SIGKILLed; the limit is back within 1 s.
TEST(ZeusdPods, APodKilledAsRootOrAsAUserGetsItsLimitBackWithinASecond) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(eight_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  for (const unsigned uid : {0u, kUserA}) {
    SCOPED_TRACE(fmt::format("uid {}", uid));
    auto pod =
        client_as(uid, daemon, {"POST", set_limit(0, 200'000)}, true, {.own_pid_namespace = true});
    EXPECT_THAT(pod->output(), HasSubstr("status=200"));
    EXPECT_EQ(nvml.limit_mw(0), 200'000);
    const auto leases = journal(daemon)["leases"];
    ASSERT_EQ(leases.size(), 1u) << "root's change is leased too";
    EXPECT_EQ(leases[0]["holders"][0]["uid"], uid);
    const auto back = limit_back_after(nvml, 0, kMax, kill_pod(*pod));
    ASSERT_TRUE(back);
    EXPECT_LT(*back, milliseconds(1000));
  }
}

// zeusd in a PID namespace of its own sees a pod's pid as 0 (SO_PEERCRED); it watches the pod's
// process through the pidfd the kernel gives for the connection's peer.
TEST(ZeusdPods, APodWhosePidZeusdCannotSeeIsWatchedThroughItsPidfd) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(eight_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir, {}, own_pid_namespace(true));
  for (const unsigned uid : {0u, kUserB}) {
    SCOPED_TRACE(fmt::format("uid {}", uid));
    auto pod =
        client_as(uid, daemon, {"POST", set_limit(1, 180'000)}, true, {.own_pid_namespace = true});
    if (pod->output().find("another PID namespace") != std::string::npos &&
        pod->output().find("status=403") != std::string::npos) {
      GTEST_SKIP() << "this kernel gives no pidfd of a socket's peer (SO_PEERPIDFD, Linux 6.5+): "
                   << pod->output();
    }
    ASSERT_THAT(pod->output(), HasSubstr("status=200"));
    EXPECT_EQ(nvml.limit_mw(1), 180'000);
    const auto holder = journal(daemon)["leases"][0]["holders"][0];
    EXPECT_EQ(holder["pid"], 0) << "invisible to zeusd: " << holder.dump();
    EXPECT_NE(holder.value("pidfd_id", uint64_t{0}), 0u) << holder.dump();
    const auto back = limit_back_after(nvml, 1, kMax, kill_pod(*pod));
    ASSERT_TRUE(back);
    EXPECT_LT(*back, milliseconds(1000));
  }
  // Such a holder cannot be found again by a later zeusd: a restart gives its GPU back.
  auto lives =
      client_as(kUserA, daemon, {"POST", set_limit(2, 160'000)}, true, {.own_pid_namespace = true});
  EXPECT_EQ(nvml.limit_mw(2), 160'000);
  daemon.kill9();
  daemon.start();
  EXPECT_TRUE(limit_back_after(nvml, 2, kMax, std::chrono::steady_clock::now()));
}

// A root pod cannot end another's lease (nor take another uid's GPU) without zeusd's admin
// token; the token's holder can, and its change then stays.
TEST(ZeusdPods, ARootPodCannotEndAnothersLeaseWithoutTheAdminToken) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(eight_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto user =
      client_as(kUserA, daemon, {"POST", set_limit(3, 200'000)}, true, {.own_pid_namespace = true});
  auto root =
      client_as(0, daemon, {"POST", set_limit(3, 120'000)}, false, {.own_pid_namespace = true});
  const std::string out = root->wait().out;
  EXPECT_THAT(out, HasSubstr("status=409"));
  EXPECT_THAT(out, HasSubstr("held by uid 61001"));
  EXPECT_EQ(nvml.limit_mw(3), 200'000);
  EXPECT_EQ(journal(daemon)["leases"].size(), 1u);
  // The admin token, sent from a pod's namespace too, is what an administrator is.
  auto admin = client_as(
      0, daemon, {"POST", set_limit(3, 250'000)}, false,
      {.own_pid_namespace = true, .env = {{"ZEUSD_TEST_ADMIN_TOKEN", daemon.admin_token()}}});
  EXPECT_THAT(admin->wait().out, HasSubstr("status=200"));
  EXPECT_TRUE(journal(daemon)["leases"].empty()) << "the admin ended user A's lease";
  kill_pod(*user);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(nvml.limit_mw(3), 250'000) << "the admin's value stays";
}

// Authorize per GPU: the kubelet gave pod P the node's GPU 4 whole and a replica of GPU 5
// (time-slicing), and pod Q a MIG device of GPU 6. A client in P's cgroup may change 4 and 5 and
// nothing else; one in Q's, GPU 6; a host process (no pod), any free GPU.
TEST(ZeusdPods, APodChangesOnlyTheGpusTheKubeletGaveIt) {
  ZEUSD_SKIP_UNLESS_ROOT();
  const std::string p = "8b4b0c3e-1111-4222-8333-944444444444";
  const std::string q = "9c5c1d4f-1111-4222-8333-944444444444";
  PodCgroup p_cgroup(p);
  PodCgroup q_cgroup(q);
  if (p_cgroup.skip_reason()) {
    GTEST_SKIP() << *p_cgroup.skip_reason();
  }
  const auto gpus = eight_a40s();
  FakeNvml nvml(gpus, false, {.permissive = false});
  SharedDir dir;
  const auto checkpoint = dir / "kubelet_internal_checkpoint";
  const nlohmann::json entries =
      nlohmann::json::array({{{"PodUID", p},
                              {"ContainerName", "train"},
                              {"ResourceName", "nvidia.com/gpu"},
                              {"DeviceIDs", {{"0", {gpus[4].uuid, gpus[5].uuid + "::1"}}}}},
                             {{"PodUID", q},
                              {"ContainerName", "train"},
                              {"ResourceName", "nvidia.com/mig-1g.10gb"},
                              {"DeviceIDs", {{"-1", {gpus[6].mig_uuids[0]}}}}},
                             {{"PodUID", q},
                              {"ContainerName", "train"},
                              {"ResourceName", "example.com/nic"},
                              {"DeviceIDs", {{"0", {gpus[7].uuid}}}}}});
  write_file_atomic(
      checkpoint, nlohmann::json{{"Data", {{"PodDeviceEntries", entries}}}, {"Checksum", 1}}.dump(),
      0600);
  ZeusdProcess daemon(dir, {"--kubelet-device-checkpoint", checkpoint.string()});
  auto in_p = client_as(
      kUserA, daemon,
      {"POST", set_limit(4, 200'000), "POST", set_limit(5, 210'000), "POST", set_limit(0, 220'000)},
      true, {.own_pid_namespace = true, .cgroup_procs = p_cgroup.procs()});
  const std::string out = in_p->output();
  EXPECT_THAT(out, HasSubstr("status=200 body=\nstatus=200 body=\nstatus=403"));
  EXPECT_THAT(out, HasSubstr("GPU 0 is not allocated to pod " + p));
  EXPECT_THAT(out, HasSubstr("GPU(s) 4, 5"));
  EXPECT_EQ(nvml.limit_mw(0), kMax);
  auto in_q = client_as(0, daemon, {"POST", set_limit(6, 230'000), "POST", set_limit(7, 240'000)},
                        false, {.own_pid_namespace = true, .cgroup_procs = q_cgroup.procs()});
  const std::string q_out = in_q->wait().out;
  EXPECT_THAT(q_out, HasSubstr("status=200 body=\nstatus=403"))
      << "a MIG device is its GPU's; a NIC is no GPU";
  EXPECT_THAT(q_out, HasSubstr("GPU 7 is not allocated"));
  auto host = client_as(kUserB, daemon, {"POST", set_limit(0, 190'000)}, false);
  EXPECT_THAT(host->wait().out, HasSubstr("status=200")) << "a host process is not a pod's";
  // The kubelet's file is re-read: P's GPU 4 goes to another pod, and P may no longer set it.
  nlohmann::json moved = entries;
  moved[0]["PodUID"] = q;
  write_file_atomic(checkpoint,
                    nlohmann::json{{"Data", {{"PodDeviceEntries", moved}}}, {"Checksum", 2}}.dump(),
                    0600);
  auto again = client_as(kUserA, daemon, {"POST", set_limit(4, 205'000)}, false,
                         {.own_pid_namespace = true, .cgroup_procs = p_cgroup.procs()});
  EXPECT_THAT(again->wait().out, HasSubstr("status=403"));
  kill_pod(*in_p);
  EXPECT_TRUE(limit_back_after(nvml, 4, kMax, std::chrono::steady_clock::now()));
  EXPECT_TRUE(limit_back_after(nvml, 5, kMax, std::chrono::steady_clock::now()));
}

// With per-GPU authorization zeusd must see the pod's pid: in a PID namespace of its own it
// refuses, naming the DaemonSet setting that fixes it.
TEST(ZeusdPods, PerGpuAuthorizationNeedsZeusdInTheHostsPidNamespace) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(eight_a40s(), false, {.permissive = false});
  SharedDir dir;
  const auto checkpoint = dir / "kubelet_internal_checkpoint";
  write_file_atomic(checkpoint, R"({"Data":{"PodDeviceEntries":[]},"Checksum":0})", 0600);
  ZeusdProcess daemon(dir, {"--kubelet-device-checkpoint", checkpoint.string()},
                      own_pid_namespace(true));
  auto pod = client_as(kUserA, daemon, {"POST", set_limit(0, 200'000)}, false,
                       {.own_pid_namespace = true});
  const std::string out = pod->wait().out;
  EXPECT_THAT(out, HasSubstr("status=403"));
  EXPECT_THAT(out, HasSubstr("hostPID: true"));
  EXPECT_EQ(nvml.limit_mw(0), kMax);
}

}  // namespace
}  // namespace zeus::test
