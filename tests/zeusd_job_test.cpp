// A zeus-cpp training job of an unprivileged user, with ZEUSD_SOCK_PATH: `zeus run` and
// zeus::DataLoader (support/loader_worker.cpp, 2 ranks) profile the power limits through zeusd,
// on a fake NVML that refuses the job's own setters, per GPU (docs/per-gpu-limits.md), and every
// GPU ends at its original limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "loader_jobs.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;

TEST(ZeusdJob, AnUnprivilegedTrainingJobProfilesThroughTheDaemonAndRestores) {
  if (const auto why = zeusd_skip_reason()) {
    GTEST_SKIP() << *why;
  }
  std::vector<FakeGpu> spec = four_a40s();
  spec.resize(2);
  FakeNvml nvml(spec, false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  const fs::path log = dir.scratch() / "log";

  auto env = sim_env(log);
  env["ZEUS_DEVICE"] = "nvml";
  env.merge(daemon.client_env());
  std::string cmd = std::string("exec ") + ZEUS_CLI_PATH + " run --nproc-per-node 2 --standalone";
  for (const auto& a : kWorker) {
    cmd += " " + a;
  }
  cmd += " --max-epochs 2 --metrics 0.1,0.9 2>&1";
  Child job({ZEUS_AS_UID_PATH, std::to_string(kUserA), "/bin/sh", "-c", cmd}, env);
  const ProcessResult r = job.wait();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("power limits are set through zeusd at " + daemon.socket().string()))
      << r.out;

  // Several limits were profiled on both GPUs, every one set by the daemon's process.
  std::set<int64_t> limits;
  for (const auto& [gpu, mw] : nvml.limit_history()) {
    limits.insert(mw);
  }
  EXPECT_GE(limits.size(), 3u) << nvml.state()["limit_history"].dump();
  for (const auto& entry : nvml.state()["limit_history"]) {
    EXPECT_EQ(entry["pid"].get<int>(), daemon.pid()) << entry.dump();
  }
  for (int g = 0; g < 2; ++g) {
    EXPECT_TRUE(eventually([&] { return nvml.limit_mw(g) == 300'000; }, std::chrono::seconds(10)))
        << "GPU " << g;
  }
  EXPECT_TRUE(fs::exists(log / "bs8.power.json"));
  // Two ranks plan their GPUs' limits one by one (equal GPUs: Zeus's choice, set per GPU).
  EXPECT_THAT(r.out, HasSubstr("per-GPU power limits [")) << r.out;
}

}  // namespace
}  // namespace zeus::test
