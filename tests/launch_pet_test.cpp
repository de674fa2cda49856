// `zeus run` in a Kubernetes pod: every torchrun flag's default from its PET_<FLAG> variable, as
// Kubeflow's TrainJob (PET_* only) and PyTorchJob (PET_* plus MASTER_ADDR, MASTER_PORT, RANK and
// WORLD_SIZE) describe the job. Through the real binary, each launcher with its own environment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "support/test_support.h"

namespace zeus::launch {
namespace {

using ::testing::HasSubstr;

// `zeus run ARGS` with exactly `env` for the pod's variables (the test's own PET_* and
// torchrun variables removed).
std::vector<std::string> in_pod(const std::map<std::string, std::string>& env,
                                const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/env"};
  for (const char* name : {"PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR",
                           "PET_MASTER_PORT", "PET_STANDALONE", "PET_RDZV_ENDPOINT", "RANK",
                           "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"}) {
    argv.push_back("-u");
    argv.push_back(name);
  }
  for (const auto& [k, v] : env) {
    argv.push_back(k + "=" + v);
  }
  argv.push_back(ZEUS_CLI_PATH);
  argv.push_back("run");
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(ZeusRunInAPod, TrainJobsPetVariablesAloneFormOneWorld) {
  const int port = test::free_port();
  std::vector<std::unique_ptr<test::Child>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<test::Child>(in_pod({{"PET_NNODES", "2"},
                                                          {"PET_NODE_RANK", std::to_string(node)},
                                                          {"PET_MASTER_ADDR", "127.0.0.1"},
                                                          {"PET_MASTER_PORT", std::to_string(port)},
                                                          {"PET_NPROC_PER_NODE", "1"}},
                                                         {ZEUS_LAUNCH_WORKER_PATH, "env"})));
  }
  for (int node = 0; node < 2; ++node) {
    const auto r = nodes[node]->wait();
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto ranks = test::by_rank(r.out);
    ASSERT_EQ(ranks.size(), 1u) << r.out;
    const auto& env = ranks.at(node);
    EXPECT_EQ(env.at("WORLD_SIZE"), "2");
    EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(node));
    EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(port));
  }
}

TEST(ZeusRunInAPod, PyTorchJobsRankAndWorldSizeNeverLeakIntoTheWorkers) {
  // PyTorchJob (v1): RANK is the node's, WORLD_SIZE the replicas', the master in MASTER_*.
  const int port = test::free_port();
  std::vector<std::unique_ptr<test::Child>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<test::Child>(in_pod({{"PET_NNODES", "2"},
                                                          {"PET_NODE_RANK", std::to_string(node)},
                                                          {"PET_NPROC_PER_NODE", "2"},
                                                          {"MASTER_ADDR", "127.0.0.1"},
                                                          {"MASTER_PORT", std::to_string(port)},
                                                          {"RANK", std::to_string(node)},
                                                          {"WORLD_SIZE", "2"}},
                                                         {ZEUS_LAUNCH_WORKER_PATH, "env"})));
  }
  for (int node = 0; node < 2; ++node) {
    const auto r = nodes[node]->wait();
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto ranks = test::by_rank(r.out);
    ASSERT_EQ(ranks.size(), 2u) << r.out;
    for (int local = 0; local < 2; ++local) {
      const auto& env = ranks.at(node * 2 + local);
      EXPECT_EQ(env.at("WORLD_SIZE"), "4");
      EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(node));
      EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(port));
    }
  }
}

TEST(ZeusRunInAPod, AFlagWinsOverItsVariable) {
  const auto r =
      test::run_process(in_pod({{"PET_NPROC_PER_NODE", "3"}, {"PET_STANDALONE", "1"}},
                               {"--nproc_per_node", "2", ZEUS_LAUNCH_WORKER_PATH, "env"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ranks = test::by_rank(r.out);
  ASSERT_EQ(ranks.size(), 2u) << r.out;
  EXPECT_NE(ranks.at(0).at("MASTER_PORT"), "29500");  // PET_STANDALONE=1: a free port
}

TEST(ZeusRunInAPod, ABadValueNamesItsVariableBeforeAnyWorkerStarts) {
  test::TempDir dir;
  const auto started = dir / "started";
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"PET_NPROC_PER_NODE", "banana"},
                                                        {"PET_NODE_RANK", "x"},
                                                        {"PET_STANDALONE", "yes"},
                                                        {"PET_MAX_RESTARTS", "-1"}}) {
    const auto r =
        test::run_process(in_pod({{name, value}}, {"/bin/sh", "-c", "touch " + started.string()}));
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(name + "='" + value + "'")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(started)) << name;
  }
}

}  // namespace
}  // namespace zeus::launch
