// examples/fashion_mnist under each launch method (short runs on a slice of the real data):
// zeus run, the legacy --local_rank argument, in-process --spawn, and Slurm's variables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "support/test_support.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kQuick{"--epochs",          "1",  "--limit-train", "1024",
                                      "--target-accuracy", "0.3"};

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
  expect_trained(test::run_process(cat({ZEUS_CLI_PATH, "run", "--nproc-per-node", "2",
                                        "--standalone", ZEUS_EXAMPLE_PATH},
                                       kQuick)),
                 "zeus run");
  expect_trained(test::run_process(cat({ZEUS_CLI_PATH, "run", "--nproc-per-node", "2",
                                        "--standalone", "--local-rank-arg", ZEUS_EXAMPLE_PATH},
                                       kQuick)),
                 "--local_rank");
  expect_trained(test::run_process(cat({ZEUS_EXAMPLE_PATH, "--spawn", "2"}, kQuick)), "--spawn");
}

// What `srun --ntasks 2` on one node gives each task (no torchrun variables).
TEST(FashionMnistExample, RunsFromSlurmVariables) {
  if (!have_data())
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string port = std::to_string(test::free_port());
  std::vector<std::unique_ptr<test::Child>> tasks;
  for (const char* id : {"0", "1"}) {
    tasks.push_back(std::make_unique<test::Child>(
        cat({ZEUS_EXAMPLE_PATH}, kQuick),
        std::map<std::string, std::string>{{"SLURM_JOB_ID", "77"},
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
}

}  // namespace
}  // namespace zeus
