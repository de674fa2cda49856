// zeusd serve --kubelet-socket: the pod holding each GPU (the kubelet's pod-resources API, here
// a fake kubelet speaking the real v1 protocol) named on the GPU's series and its holders', in
// the audit's change lines and in job-energy records; each pod holding GPUs gets a record of its
// own, started when the kubelet lists it and stopped when it is gone.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "metrics_support.h"
#include "support/fake_amdsmi_machine.h"
#include "support/fake_kubelet.h"
#include "support/http_client.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

nlohmann::json report(const ZeusdProcess& daemon, const std::string& job) {
  const auto r = daemon.call("GET", "/job_energy/report?job_ids=" + job);
  return r.status == 200 ? nlohmann::json::parse(r.body) : nlohmann::json(r.status);
}

TEST(ZeusdOnKubernetes, SeriesHoldersAuditAndJobRecordsNameThePodHoldingEachGpu) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  FakeKubelet kubelet((dir / "kubelet.sock").string());
  kubelet.set_pods({{"train-0", "ml", "pytorch", "nvidia.com/gpu", {four_a40s()[1].uuid}}});
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(
      dir, {"--metrics-bind-address", address, "--metrics-period-ms", "50", "--kubelet-socket",
            kubelet.socket_path(), "--kubelet-period-ms", "100"});

  // The GPU's series: GPU 1 carries its pod, GPU 0 (no pod) empty labels.
  const std::string gpu1 = fmt::format(
      "zeus_gpu_power_watts{{gpu=\"1\",uuid=\"{}\",name=\"NVIDIA A40\",host=\"{}\",pod=\"train-0\","
      "namespace=\"ml\",container=\"pytorch\"}}",
      four_a40s()[1].uuid, host_name());
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = scrape(address);
        return text.find(gpu1) != std::string::npos;
      },
      seconds(10)))
      << text;
  EXPECT_THAT(text, HasSubstr("pod=\"\",namespace=\"\",container=\"\"}"));

  // A holder's series and the audit's change line name the pod.
  auto holder =
      client_as(kUserA, daemon,
                {"POST", "/gpu/set_power_limit?gpu_ids=1&block=true&power_limit_mw=200000"}, true);
  ASSERT_TRUE(eventually(
      [&] {
        text = scrape(address);
        return text.find("zeus_gpu_limit_holder_info{gpu=\"1\"") != std::string::npos;
      },
      seconds(10)))
      << text;
  EXPECT_THAT(text, HasSubstr(fmt::format("uid=\"{}\",job=\"\",pod=\"train-0\",namespace=\"ml\","
                                          "container=\"pytorch\"}} 1",
                                          kUserA)));
  std::ifstream audit(daemon.state_dir() / "audit.jsonl");
  std::string line;
  int named = 0;
  while (std::getline(audit, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "change") {
      EXPECT_EQ(j.value("pod", ""), "train-0") << line;
      EXPECT_EQ(j.value("namespace", ""), "ml") << line;
      ++named;
    }
  }
  EXPECT_EQ(named, 1);

  // A prolog's record names the pods of its GPUs.
  ASSERT_EQ(daemon.call("POST", "/job_energy/start?job_id=42&gpu_ids=0,1").status, 200);
  const auto job = report(daemon, "42");
  ASSERT_TRUE(job.is_array()) << job.dump();
  EXPECT_EQ(job[0]["pods"], nlohmann::json({"ml/train-0"}));
  EXPECT_FALSE(job[0]["gpus"][0].contains("pod")) << "GPU 0 has none";
  EXPECT_EQ(job[0]["gpus"][1]["pod"], "train-0");

  // The pod's own record: started when the kubelet listed it, stopped once it is gone.
  const auto pod = report(daemon, "pod:ml:train-0");
  ASSERT_TRUE(pod.is_array()) << pod.dump();
  EXPECT_EQ(pod[0]["state"], "running");
  EXPECT_EQ(pod[0]["gpus"].size(), 1u);
  EXPECT_EQ(pod[0]["gpus"][0]["gpu"], 1);
  EXPECT_EQ(pod[0]["gpus"][0]["container"], "pytorch");
  kubelet.set_pods({{"eval-0", "ml", "eval", "nvidia.com/gpu", {four_a40s()[2].uuid}}});
  EXPECT_TRUE(eventually([&] { return report(daemon, "pod:ml:train-0")[0]["state"] == "finished"; },
                         seconds(10)));
  EXPECT_TRUE(eventually([&] { return report(daemon, "pod:ml:eval-0").is_array(); }, seconds(10)));
  EXPECT_GE(pod[0]["energy_j"].get<double>(), 0.0);
  const ProcessResult csv =
      run_process({ZEUS_CLI_PATH, "job-energy", "report", "42", "pod:ml:train-0", "--format", "csv",
                   "--zeusd-socket", daemon.socket().string()});
  EXPECT_THAT(csv.out, HasSubstr("42,running,1,"));
  EXPECT_THAT(csv.out, HasSubstr(",ml/train-0\n42,running,all,"));
  EXPECT_THAT(csv.out, HasSubstr(",ml/train-0\npod:ml:train-0,finished,all,"));
  const ProcessResult table = run_process(
      {ZEUS_CLI_PATH, "job-energy", "report", "42", "--zeusd-socket", daemon.socket().string()});
  EXPECT_THAT(table.out, HasSubstr("  pods: ml/train-0\n"));

  // A restarted daemon keeps the record of a pod still running, and ends one gone meanwhile.
  const double eval_start = report(daemon, "pod:ml:eval-0")[0]["start_unix_s"].get<double>();
  ASSERT_EQ(daemon.call("POST", "/job_energy/start?job_id=pod:ml:gone-0&gpu_ids=3").status, 200);
  daemon.kill9();
  daemon.start();
  EXPECT_TRUE(eventually([&] { return report(daemon, "pod:ml:gone-0")[0]["state"] == "finished"; },
                         seconds(10)));
  const auto eval = report(daemon, "pod:ml:eval-0");
  EXPECT_EQ(eval[0]["state"], "running");
  EXPECT_EQ(eval[0]["start_unix_s"].get<double>(), eval_start) << "not started again";
}

// AMD's device plugin lists a GPU by its PCI address (upper or lower case).
TEST(ZeusdOnKubernetes, AnAmdGpuIsFoundByThePciAddressAmdsPluginLists) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeAmdsmi amd(mi300xs(4), {.permissive = false});
  SharedDir dir;
  FakeKubelet kubelet((dir / "kubelet.sock").string());
  std::string bdf = mi300xs(4)[2].bdf;
  std::transform(bdf.begin(), bdf.end(), bdf.begin(), ::toupper);
  kubelet.set_pods({{"rocm-0", "ml", "trainer", "amd.com/gpu", {bdf}}});
  ZeusdProcess daemon(dir, {"--gpu-backend", "amdsmi", "--kubelet-socket", kubelet.socket_path(),
                            "--kubelet-period-ms", "100"});
  nlohmann::json pod;
  ASSERT_TRUE(eventually(
      [&] {
        pod = report(daemon, "pod:ml:rocm-0");
        return pod.is_array();
      },
      seconds(10)))
      << pod.dump();
  EXPECT_EQ(pod[0]["gpus"].size(), 1u);
  EXPECT_EQ(pod[0]["gpus"][0]["gpu"], 2);
  EXPECT_EQ(pod[0]["gpus"][0]["pod"], "rocm-0");
}

TEST(ZeusdOnKubernetes, ASilentKubeletNeverHoldsTheDaemonBack) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  // No kubelet on the socket: the daemon starts, serves its metrics without pods, and answers.
  ZeusdProcess daemon(dir, {"--metrics-bind-address", address, "--kubelet-socket",
                            (dir / "absent.sock").string(), "--kubelet-period-ms", "100"});
  const std::string text = scrape(address);
  EXPECT_THAT(text, HasSubstr("zeus_gpu_power_watts{gpu=\"0\""));
  EXPECT_THAT(text, HasSubstr("pod=\"\",namespace=\"\",container=\"\"}"));
  EXPECT_EQ(daemon.call("GET", "/job_energy/report").status, 200);
}

// Issue #52: a time-sliced GPU held by two pods (device ids "GPU-...::N") and a MIG device are
// attributed: the GPU's series names both pods, and each pod's record has the GPU.
TEST(ZeusdOnKubernetes, PodsSharingAGpuAreAllNamedAndEachRecordHasIt) {
  ZEUSD_SKIP_UNLESS_ROOT();
  auto gpus = four_a40s();
  gpus[2].mig_uuids = {"MIG-22222222-1111-2222-3333-444444444444"};
  FakeNvml nvml(gpus, false, {.permissive = false});
  SharedDir dir;
  FakeKubelet kubelet((dir / "kubelet.sock").string());
  kubelet.set_pods({{"b-0", "ml", "train", "nvidia.com/gpu", {gpus[1].uuid + "::1"}},
                    {"a-0", "ml", "train", "nvidia.com/gpu", {gpus[1].uuid + "::0"}},
                    {"nb-0", "dev", "lab", "nvidia.com/mig-1g.10gb", {gpus[2].mig_uuids[0]}}});
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(
      dir, {"--metrics-bind-address", address, "--metrics-period-ms", "50", "--kubelet-socket",
            kubelet.socket_path(), "--kubelet-period-ms", "100"});
  const std::string shared = fmt::format(
      "zeus_gpu_power_watts{{gpu=\"1\",uuid=\"{}\",name=\"NVIDIA A40\",host=\"{}\",pod=\"a-0,b-0\","
      "namespace=\"ml,ml\",container=\"train,train\"}}",
      gpus[1].uuid, host_name());
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = scrape(address);
        return text.find(shared) != std::string::npos;
      },
      seconds(10)))
      << text;
  EXPECT_THAT(text, HasSubstr("gpu=\"2\",uuid=\"" + gpus[2].uuid));
  EXPECT_THAT(text, HasSubstr("pod=\"nb-0\",namespace=\"dev\",container=\"lab\"}"));
  for (const std::string pod : {"pod:ml:a-0", "pod:ml:b-0"}) {
    nlohmann::json r;
    ASSERT_TRUE(eventually(
        [&] {
          r = report(daemon, pod);
          return r.is_array();
        },
        seconds(10)))
        << pod;
    ASSERT_EQ(r[0]["gpus"].size(), 1u) << r.dump();
    EXPECT_EQ(r[0]["gpus"][0]["gpu"], 1) << pod;
  }
  EXPECT_TRUE(eventually([&] { return report(daemon, "pod:dev:nb-0").is_array(); }, seconds(10)));
  EXPECT_EQ(report(daemon, "pod:dev:nb-0")[0]["gpus"][0]["gpu"], 2) << "the MIG device's GPU";
}

}  // namespace
}  // namespace zeus::test
