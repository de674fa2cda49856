// zeus::DataLoader jobs on AMD GPUs: 2 ranks under `zeus run` on the fake libamd_smi, its caps
// profiled and set in uW, and put back when the job ends, and when a rank is SIGKILLed
// mid-profiling (zeus run restores from the node's journal); ROCm's visibility variables bind
// each local rank to its GPU.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "loader_jobs.h"
#include "support/fake_amdsmi_machine.h"
#include "zeus/contract/train_result.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;

// Caps 650-750 W: five limits in Zeus's 25 W steps, profiled within the first epoch.
std::vector<test::FakeAmdGpu> two_mi300xs() {
  std::vector<test::FakeAmdGpu> gpus = test::mi300xs(4);
  for (auto& g : gpus) {
    g.min_cap_uw = 650'000'000;
  }
  return gpus;
}

TEST(DataLoaderOnAmd, ProfilesCapsAndPutsThemBack) {
  test::TempDir dir;
  test::FakeAmdsmi amd(two_mi300xs());
  auto env = sim_env(dir / "log");
  env["ZEUS_DEVICE"] = "amdsmi";
  Job job = run_job(env, {"--max-epochs", "2", "--metrics", "0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  std::set<uint64_t> caps;
  std::set<int> touched;
  for (const auto& [gpu, uw] : amd.cap_history()) {
    caps.insert(uw);
    touched.insert(gpu);
  }
  EXPECT_EQ(caps,
            (std::set<uint64_t>{650'000'000, 675'000'000, 700'000'000, 725'000'000, 750'000'000}))
      << "every limit profiled, in uW at the library\n"
      << job.output;
  EXPECT_EQ(touched, (std::set<int>{0, 1})) << "the two GPUs the ranks use, no other";
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(amd.cap_uw(g), 750'000'000u) << "GPU " << g;
  }
  const contract::TrainResult r = contract::load_train_result(dir / "log" / "zeus+bs8.train.json");
  EXPECT_TRUE(r.profiled);
  EXPECT_GT(r.epochs.front().train_energy_j, 0);
}

TEST(DataLoaderOnAmd, ASigkilledRankStillGetsItsCapsBack) {
  test::TempDir dir;
  test::FakeAmdsmi amd(two_mi300xs());
  auto env = sim_env(dir / "log");
  env["ZEUS_DEVICE"] = "amdsmi";
  // Step 20 of epoch 0 is the third limit's window (7 steps per limit): 700 W.
  Job job = run_job(env, {"--max-epochs", "3", "--kill-at-step", "20"});
  EXPECT_NE(job.result.exit_code, 0) << job.output;
  EXPECT_THAT(job.output, HasSubstr("restored the power limits")) << job.output;
  bool lowered = false;
  for (const auto& [gpu, uw] : amd.cap_history()) {
    lowered = lowered || uw < 750'000'000;
  }
  EXPECT_TRUE(lowered) << "the kill came while a cap was lowered";
  EXPECT_EQ(amd.cap_uw(0), 750'000'000u);
  EXPECT_EQ(amd.cap_uw(1), 750'000'000u);
  EXPECT_FALSE(fs::exists(dir / "log" / "power-limits.journal"));
}

// ROCR_VISIBLE_DEVICES=2,3 and, per worker, HIP_VISIBLE_DEVICES (zeus run --devices sets the
// worker's own list): HIP GPU 3 is AMD SMI's GPU 0 here, so local rank 1 must measure and cap
// machine GPU 0 and rank 0 machine GPU 1 (HIP 2); GPUs 2 and 3 are never touched.
TEST(DataLoaderOnAmd, RocmVisibilityBindsEachRankToItsGpu) {
  test::TempDir dir;
  std::vector<test::FakeAmdGpu> gpus = two_mi300xs();
  for (int i = 0; i < 4; ++i) {
    gpus[static_cast<size_t>(i)].hip_id = 3 - i;
  }
  test::FakeAmdsmi amd(gpus);
  auto env = sim_env(dir / "log");
  env["ZEUS_DEVICE"] = "amdsmi";
  env["ROCR_VISIBLE_DEVICES"] = "2,3";
  env["HIP_VISIBLE_DEVICES"] = "0,1";
  Job job = run_job(env, {"--max-epochs", "2", "--metrics", "0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  std::set<int> touched;
  for (const auto& [gpu, uw] : amd.cap_history()) {
    touched.insert(gpu);
  }
  EXPECT_EQ(touched, (std::set<int>{0, 1})) << job.output;
  EXPECT_THAT(job.output,
              HasSubstr(fmt::format("({}, AMD Instinct MI300X, machine index 0)", gpus[0].uuid)))
      << "the local master names what it owns";
}

}  // namespace
}  // namespace zeus
