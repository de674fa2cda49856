// examples/fashion_mnist under each launch method (short runs on a slice of the real data, on
// simulated V100s): zeus run, the legacy --local_rank argument, in-process --spawn, and
// Slurm's variables; and one full run on the real data that must reach 0.88 test accuracy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/data/image_codec.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;

// Each test passes its own --log-dir after these.
const std::vector<std::string> kQuick{"--epochs",          "1",   "--limit-train", "1024",
                                      "--target-accuracy", "0.3", "--device",      "sim:v100"};

bool have_data() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_trained(const test::ProcessResult& r, const std::string& how) {
  EXPECT_EQ(r.exit_code, 0) << how << ": " << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("on 2 rank(s)")) << how;
  EXPECT_THAT(r.out, HasSubstr("target 0.30: reached")) << how;
}

TEST(FashionMnistExample, RunsUnderZeusRunLegacyLocalRankAndSpawn) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  auto quick = [&](const std::string& name) {
    return cat(kQuick, {"--log-dir", (dir / name).string()});
  };
  expect_trained(test::run_process(cat({ZEUS_CLI_PATH, "run", "--nproc-per-node", "2",
                                        "--standalone", ZEUS_EXAMPLE_PATH},
                                       quick("run"))),
                 "zeus run");
  expect_trained(test::run_process(cat({ZEUS_CLI_PATH, "run", "--nproc-per-node", "2",
                                        "--standalone", "--local-rank-arg", ZEUS_EXAMPLE_PATH},
                                       quick("legacy"))),
                 "--local_rank");
  expect_trained(test::run_process(cat({ZEUS_EXAMPLE_PATH, "--spawn", "2"}, quick("spawn"))),
                 "--spawn");
  // Each run wrote its result: 1 epoch, target reached, global batch 128.
  for (const char* name : {"run", "legacy", "spawn"}) {
    const auto result = dir / name / "zeus+bs128.train.json";
    EXPECT_TRUE(std::filesystem::exists(result)) << result;
  }
}

// The run: 4 ranks under zeus run on simulated V100s, the third 20% slower. Per GPU
// (the default), the job ends at the planner's limits and its second epoch (after profiling)
// spends less energy in no more time than the same run with ZEUS_POWER_LIMIT_PLAN=global.
TEST(FashionMnistExample, PerGpuLimitsUnderZeusRunSpendLessThanOneLimit) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  test::ScopedEnv params("ZEUS_PROFILE_PARAMS", "2,5");
  const auto run = [&](const std::string& plan) {
    test::ScopedEnv mode("ZEUS_POWER_LIMIT_PLAN", plan);
    const auto r = test::run_process(
        {ZEUS_CLI_PATH, "run", "--nproc-per-node", "4", "--standalone", "--omp-num-threads", "1",
         ZEUS_EXAMPLE_PATH, "--epochs", "2", "--limit-train", "16384", "--target-accuracy", "0.99",
         "--device", "sim:v100,v100,v100*1.2,v100:cifar100:1024", "--log-dir",
         (dir / plan).string()},
        std::chrono::seconds(240));  // 4 libtorch ranks on 2 cores
    EXPECT_EQ(r.exit_code, 0) << plan << ": " << r.out << r.err;
    return nlohmann::json::parse(read_file(dir / plan / "zeus+bs256.train.json"));
  };
  const auto per_gpu = run("per_gpu");
  const auto global = run("global");
  EXPECT_EQ(per_gpu["power_limit_plan"], "per_gpu");
  EXPECT_EQ(per_gpu["power_limits_w"], nlohmann::json({125.0, 125.0, 225.0, 125.0}));
  EXPECT_EQ(global["power_limit_plan"], "global");
  EXPECT_EQ(global["optimal_pl"], 175.0);
  ASSERT_EQ(per_gpu["epochs"].size(), 2u);
  ASSERT_EQ(global["epochs"].size(), 2u);
  const auto& mine = per_gpu["epochs"][1];
  const auto& theirs = global["epochs"][1];
  EXPECT_LT(mine["train_energy"].get<double>(), 0.97 * theirs["train_energy"].get<double>());
  EXPECT_LE(mine["train_time"].get<double>(), theirs["train_time"].get<double>());
}

TEST(FashionMnistExample, MissingDatasetIsAClearErrorBeforeTraining) {
  test::TempDir dir;
  const auto r = test::run_process({ZEUS_EXAMPLE_PATH, "--data", (dir / "no-such-dir").string(),
                                    "--device", "sim:v100", "--log-dir", (dir / "log").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr((dir / "no-such-dir").string()));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("epoch 1/")));
  EXPECT_FALSE(std::filesystem::exists(dir / "log" / "zeus+bs64.train.json"));
}

// --device-type and --measure-only: on this machine (no GPU) auto trains on the CPU, cuda is a
// clear error before any work, and measure-only trains without profiling or setting a limit.
TEST(FashionMnistExample, DeviceTypeAndMeasureOnly) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const auto cuda =
      test::run_process(cat(cat({ZEUS_EXAMPLE_PATH}, kQuick),
                            {"--log-dir", (dir / "cuda").string(), "--device-type", "cuda"}));
  if (cuda.exit_code == 0) {
    GTEST_SKIP() << "this machine has a GPU (scripts/gpu-check.sh trains on it)";
  }
  EXPECT_EQ(cuda.exit_code, 2) << cuda.out << cuda.err;
  EXPECT_THAT(cuda.err, HasSubstr("device type cuda was asked for"));
  EXPECT_THAT(cuda.err, HasSubstr("--device-type cpu"));
  const auto bad = test::run_process({ZEUS_EXAMPLE_PATH, "--device-type", "gpu"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--device-type"));

  const auto measured = test::run_process(
      cat(cat({ZEUS_EXAMPLE_PATH}, kQuick), {"--log-dir", (dir / "m").string(), "--measure-only"}));
  ASSERT_EQ(measured.exit_code, 0) << measured.out << measured.err;
  EXPECT_THAT(measured.err, HasSubstr("measure-only: no limit set"));
  const auto result = nlohmann::json::parse(read_file(dir / "m" / "zeus+bs64.train.json"));
  EXPECT_TRUE(result["measure_only"].get<bool>());
  EXPECT_TRUE(result["profile_windows"].empty()) << "nothing profiled";
  EXPECT_GT(result["energy"].get<double>(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "m" / "bs64.power.json"));
}

// What `srun --ntasks 2` on one node gives each task (no torchrun variables; slurm_test runs
// the example under a real Slurm).
TEST(FashionMnistExample, RunsFromSlurmVariables) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string port = std::to_string(test::free_port());
  test::TempDir dir;
  std::vector<std::unique_ptr<test::Child>> tasks;
  for (const char* id : {"0", "1"}) {
    tasks.push_back(std::make_unique<test::Child>(
        cat(cat({ZEUS_EXAMPLE_PATH}, kQuick), {"--log-dir", dir.path().string()}),
        std::map<std::string, std::string>{{"SLURM_JOB_ID", "77"},
                                           {"SLURM_STEP_ID", "0"},
                                           {"SLURM_PROCID", id},
                                           {"SLURM_LOCALID", id},
                                           {"SLURM_NTASKS", "2"},
                                           {"SLURM_NODEID", "0"},
                                           {"SLURM_NTASKS_PER_NODE", "2"},
                                           {"SLURM_JOB_NODELIST", "localhost"},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", port},
                                           {"OMP_NUM_THREADS", "1"}}));
  }
  const auto master = tasks[0]->wait();
  const auto other = tasks[1]->wait();
  EXPECT_EQ(other.exit_code, 0) << other.out;
  EXPECT_EQ(master.exit_code, 0) << master.out;
  EXPECT_THAT(master.out, HasSubstr("on 2 rank(s)"));
  EXPECT_TRUE(std::filesystem::exists(dir / "zeus+bs128.train.json"));
}

// `zeus tune` over the real example (2 recurrences of 1 short epoch), killed after the first
// recurrence and resumed.
TEST(FashionMnistExample, ZeusTuneRunsItAndResumesAfterBeingKilled) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const std::vector<std::string> argv{ZEUS_CLI_PATH,
                                      "tune",
                                      "--batch-sizes",
                                      "32,64",
                                      "--default-batch-size",
                                      "64",
                                      "--recurrences",
                                      "2",
                                      "--log-dir",
                                      dir.path().string(),
                                      "--",
                                      ZEUS_CLI_PATH,
                                      "run",
                                      "--nproc-per-node",
                                      "2",
                                      "--standalone",
                                      ZEUS_EXAMPLE_PATH,
                                      "--batch-size",
                                      "{bs}",
                                      "--epochs",
                                      "1",
                                      "--limit-train",
                                      "2048",
                                      "--target-accuracy",
                                      "0.3",
                                      "--device",
                                      "sim:v100",
                                      "--seed",
                                      "{seed}"};
  {
    test::Child tuner(argv);
    ASSERT_TRUE(tuner.wait_for_output("recurrence 1/2 done", std::chrono::seconds(300)));
    tuner.kill(SIGKILL);
    tuner.wait();
  }
  const auto r = test::run_process(argv, std::chrono::seconds(600));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("resuming"));
  EXPECT_THAT(r.out, HasSubstr("recurrence 2/2 done"));
  const std::string tries = read_file(dir / "tune-tries.jsonl");
  EXPECT_THAT(tries, HasSubstr("\"recurrence\":1"));
  // The first try ran at the default: 64 per rank, so 128 in the file name.
  EXPECT_TRUE(std::filesystem::exists(dir / "rec000+try0+bs128.train.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "power-limits.journal"));
}

// examples/image_folder on a tiny generated ImageNet-layout tree (PNG and JPEG, two colours),
// 2 ranks with 2 decoding threads each.
TEST(ImageFolderExample, TrainsOnAGeneratedTree) {
  test::TempDir dir;
  for (const char* split : {"train", "val"}) {
    for (int c = 0; c < 2; ++c) {
      const auto folder = dir / "data" / split / (c == 0 ? "red" : "blue");
      std::filesystem::create_directories(folder);
      for (int i = 0; i < (std::string(split) == "train" ? 12 : 4); ++i) {
        data::Rgb8Image img{24 + i, 20 + 2 * i, {}};
        img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
        for (size_t p = 0; p < img.pixels.size(); p += 3) {
          img.pixels[p + (c == 0 ? 0 : 2)] = static_cast<uint8_t>(180 + (p / 3 + i) % 60);
          img.pixels[p + 1] = static_cast<uint8_t>((p / 3) % 50);
        }
        if (i % 2 == 0)
          data::write_png(folder / (std::to_string(i) + ".png"), img);
        else
          data::write_jpeg(folder / (std::to_string(i) + ".jpg"), img);
      }
    }
  }
  const auto r = test::run_process({ZEUS_CLI_PATH,
                                    "run",
                                    "--nproc-per-node",
                                    "2",
                                    "--standalone",
                                    ZEUS_IMAGE_FOLDER_PATH,
                                    "--data",
                                    (dir / "data").string(),
                                    "--epochs",
                                    "2",
                                    "--image-size",
                                    "16",
                                    "--batch-size",
                                    "2",
                                    "--workers",
                                    "2",
                                    "--target-accuracy",
                                    "0.5",
                                    "--device",
                                    "sim:v100",
                                    "--log-dir",
                                    (dir / "log").string()},
                                   std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 classes, 24 training and 8 validation images, 2 loader threads"));
  EXPECT_THAT(r.out, HasSubstr("target 0.50: reached"));
  EXPECT_TRUE(std::filesystem::exists(dir / "log" / "zeus+bs4.train.json"));

  const auto missing =
      test::run_process({ZEUS_IMAGE_FOLDER_PATH, "--data", (dir / "nowhere").string(), "--device",
                         "sim:v100", "--log-dir", (dir / "log2").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr((dir / "nowhere" / "train").string()));
}

// The real thing: 2 ranks on all 60000 training images reach 0.88 test accuracy within 3
// epochs, while the train loader profiles 7 limits of the simulated V100 in the first epoch.
TEST(FashionMnistAccuracy, ReachesTheTargetOnRealData) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  test::TempDir dir;
  const auto r = test::run_process(
      {ZEUS_CLI_PATH, "run", "--nproc-per-node", "2", "--standalone", "--omp-num-threads", "1",
       ZEUS_EXAMPLE_PATH, "--epochs", "3", "--target-accuracy", "0.88", "--device", "sim:v100",
       "--log-dir", dir.path().string()},
      std::chrono::seconds(1500));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("target 0.88: reached"));
  std::printf("%s", r.out.c_str());
  const auto result = nlohmann::json::parse(read_file(dir / "zeus+bs128.train.json"));
  EXPECT_TRUE(result["reached"].get<bool>());
  EXPECT_LE(result["num_epochs"].get<int>(), 3);
  EXPECT_EQ(result["profile_windows"].size(), 7u);
  EXPECT_TRUE(std::filesystem::exists(dir / "bs128.power.json"));
}

}  // namespace
}  // namespace zeus
