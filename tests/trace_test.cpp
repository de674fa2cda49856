#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/trace/power_trace.h"

using ::testing::HasSubstr;

namespace zeus::trace {
namespace {

TEST(PowerTrace, LoadsEveryGpuModelWithSaneValues) {
  for (const auto model : trace_gpu_models()) {
    const PowerTrace trace = PowerTrace::load_gpu(model);
    EXPECT_GT(trace.rows().size(), 200u) << model;
    EXPECT_GE(trace.min_power_limit_w(), 100) << model;
    EXPECT_LE(trace.max_power_limit_w(), 300) << model;
    EXPECT_LT(trace.min_power_limit_w(), trace.max_power_limit_w()) << model;
    for (const auto& w : all_workloads()) {
      const auto sizes = trace.batch_sizes(w.dataset);
      EXPECT_FALSE(sizes.empty()) << model << " " << w.dataset;
    }
  }
}

TEST(PowerTrace, V100RangeIsThePapers) {
  const PowerTrace trace = PowerTrace::load_gpu("v100");
  EXPECT_EQ(trace.min_power_limit_w(), 100);
  EXPECT_EQ(trace.max_power_limit_w(), 250);
}

TEST(PowerTrace, ProfilesHaveOnePointPerLimit) {
  // A duplicated limit would make interpolation ambiguous; the default optimizer picks one run.
  for (const auto model : trace_gpu_models()) {
    const PowerTrace trace = PowerTrace::load_gpu(model);
    for (const auto& w : all_workloads()) {
      for (const int64_t bs : trace.batch_sizes(w.dataset)) {
        const auto profile = trace.profile(w.dataset, bs);
        std::set<int64_t> limits;
        for (const auto& p : profile.points()) {
          EXPECT_TRUE(limits.insert(p.power_limit_w).second)
              << model << " " << w.dataset << " bs " << bs << " limit " << p.power_limit_w;
        }
      }
    }
  }
}

TEST(PowerProfile, InterpolatesLinearlyAndClampsAtEnds) {
  PowerProfile profile(
      {{"d", "n", "o", 32, 100, 20.0, 90.0}, {"d", "n", "o", 32, 200, 10.0, 180.0}});
  EXPECT_DOUBLE_EQ(profile.time_per_epoch_s(100), 20.0);
  EXPECT_DOUBLE_EQ(profile.time_per_epoch_s(150), 15.0);
  EXPECT_DOUBLE_EQ(profile.average_power_w(175), 157.5);
  EXPECT_DOUBLE_EQ(profile.time_per_epoch_s(50), 20.0);
  EXPECT_DOUBLE_EQ(profile.average_power_w(300), 180.0);
}

TEST(PowerTrace, ProfileMatchesCsvRowsExactly) {
  const PowerTrace trace = PowerTrace::load_gpu("a40");
  const auto profile = trace.profile("librispeech", 32);
  for (const auto& row : trace.rows()) {
    if (row.dataset == "librispeech" && row.batch_size == 32) {
      EXPECT_DOUBLE_EQ(profile.time_per_epoch_s(static_cast<double>(row.power_limit_w)),
                       row.time_per_epoch_s);
      EXPECT_DOUBLE_EQ(profile.average_power_w(static_cast<double>(row.power_limit_w)),
                       row.average_power_w);
    }
  }
}

TEST(PowerTrace, UnknownNamesListTheChoices) {
  try {
    PowerTrace::load_gpu("h100");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("a40, p100, rtx6000, v100"));
  }
  try {
    find_workload("mnist");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("imagenet"));
  }
  try {
    PowerTrace::load_gpu("v100").profile("imagenet", 7);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch size 7"));
    EXPECT_THAT(e.what(), HasSubstr("256"));
  }
}

TEST(PowerTrace, CorruptFilesNameLine) {
  test::TempDir dir;
  const auto path = dir / "summary_power_v100.csv";
  std::ofstream(path) << "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,"
                         "average_power\nimagenet,resnet50,256,adadelta,abc,1.0,100\n";
  try {
    PowerTrace::load(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":2"));
    EXPECT_THAT(e.what(), HasSubstr("power_limit"));
  }
  std::ofstream(path) << "dataset,network\nimagenet,resnet50\n";
  EXPECT_THROW(PowerTrace::load(path), ConfigError);
  EXPECT_THROW(PowerTrace::load(dir / "missing.csv"), IoError);
}

TEST(TraceDir, EnvOverridesAndMissingDirIsExplained) {
  test::TempDir dir;
  test::ScopedEnv env("ZEUS_TRACE_DIR", dir.path().string());
  try {
    trace_dir();
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.path().string()));
    EXPECT_THAT(e.what(), HasSubstr("ZEUS_TRACE_DIR"));
  }
}

}  // namespace
}  // namespace zeus::trace
