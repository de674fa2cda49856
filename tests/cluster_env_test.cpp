#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "zeus/cluster/env.h"
#include "zeus/cluster/slurm.h"
#include "zeus/common/errors.h"

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace zeus::cluster {
namespace {

EnvLookup vars(std::map<std::string, std::string, std::less<>> m) {
  return [m = std::move(m)](std::string_view name) -> std::optional<std::string> {
    const auto it = m.find(name);
    return it == m.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

void expect_error(const EnvOptions& options, const EnvLookup& lookup, const std::string& needle) {
  try {
    const Env env = detect_env(options, lookup);
    ADD_FAILURE() << "accepted: " << env.describe();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(needle));
  }
}

TEST(DetectEnv, SingleProcessNeedsNothing) {
  const Env env = detect_env({}, vars({}));
  EXPECT_EQ(env.source, EnvSource::kSingle);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_TRUE(env.is_master());
  EXPECT_THAT(env.describe(), HasSubstr("single process"));
}

TEST(DetectEnv, TorchrunVariables) {
  const Env env = detect_env({}, vars({{"RANK", "5"},
                                       {"LOCAL_RANK", "1"},
                                       {"WORLD_SIZE", "8"},
                                       {"LOCAL_WORLD_SIZE", "4"},
                                       {"GROUP_RANK", "1"},
                                       {"MASTER_ADDR", "node0"},
                                       {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(env.source, EnvSource::kTorchrun);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 4);
  EXPECT_EQ(env.node_rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29400);
  EXPECT_FALSE(env.is_master());
  EXPECT_FALSE(env.is_local_master());
  EXPECT_THAT(env.describe(), HasSubstr("rank 5/8 (local 1/4, node 1)"));
  EXPECT_FALSE(env.agent_store);
}

// torchrun >= 2.0 serves the store itself; rank 0 must then connect, not serve.
TEST(DetectEnv, TorchrunAgentStore) {
  const Env env = detect_env({}, vars({{"RANK", "0"},
                                       {"LOCAL_RANK", "0"},
                                       {"WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "127.0.0.1"},
                                       {"MASTER_PORT", "29400"},
                                       {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                       {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  EXPECT_TRUE(env.agent_store);
  EXPECT_EQ(env.restart_count, 2);
}

TEST(DetectEnv, ExplicitBeatsEnvironment) {
  const Env env = detect_env({.rank = 0, .world_size = 2, .master_addr = "127.0.0.1"},
                             vars({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}}));
  EXPECT_EQ(env.source, EnvSource::kExplicit);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.master_port, 29500);
}

TEST(DetectEnv, LegacyLocalRankArgument) {
  std::vector<std::string> args = {"train", "--local_rank=3", "--lr", "0.1"};
  const auto local = take_local_rank_arg(args);
  EXPECT_EQ(local, 3);
  EXPECT_THAT(args, ElementsAre("train", "--lr", "0.1"));
  args = {"train", "--local-rank", "2", "x"};
  EXPECT_EQ(take_local_rank_arg(args), 2);
  EXPECT_THAT(args, ElementsAre("train", "x"));
  args = {"train"};
  EXPECT_EQ(take_local_rank_arg(args), std::nullopt);
  args = {"train", "--local_rank=two"};
  EXPECT_THROW(take_local_rank_arg(args), ConfigError);

  const Env env = detect_env({.legacy_local_rank = 1},
                             vars({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}));
  EXPECT_EQ(env.source, EnvSource::kLegacyLocalRank);
  EXPECT_EQ(env.local_rank, 1);
  expect_error({.legacy_local_rank = 1}, vars({{"WORLD_SIZE", "2"}}), "RANK is not set");
}

TEST(DetectEnv, SlurmWithCompressedNodeListAndTaskCounts) {
  const Env env = detect_env({}, vars({{"SLURM_PROCID", "9"},
                                       {"SLURM_LOCALID", "1"},
                                       {"SLURM_NTASKS", "11"},
                                       {"SLURM_NODEID", "2"},
                                       {"SLURM_NTASKS_PER_NODE", "4(x2),3"},
                                       {"SLURM_JOB_NODELIST", "gpu[01-02,07],cpu3"},
                                       {"SLURM_JOB_ID", "123456"},
                                       {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(env.source, EnvSource::kSlurm);
  EXPECT_EQ(env.rank, 9);
  EXPECT_EQ(env.local_world_size, 3) << "node 2 runs 3 tasks";
  EXPECT_EQ(env.master_addr, "gpu01");
  EXPECT_EQ(env.master_port, slurm_default_port("123456", "0"));
  EXPECT_GE(env.master_port, 15000);
  EXPECT_LT(env.master_port, 35000);
}

// Variables as a real Slurm 22.05 gives them (recorded with tests/slurm/fixture.sh).
// `sbatch -N1 --ntasks-per-node=2 --wrap "srun -n1 ./train"`: the step's task sees the job's
// SLURM_NTASKS_PER_NODE=2 but is alone in its step.
TEST(DetectEnv, SlurmStepSmallerThanItsJobUsesTheStepsCounts) {
  const Env env = detect_env({}, vars({{"SLURM_JOB_ID", "2"},
                                       {"SLURM_STEP_ID", "0"},
                                       {"SLURM_PROCID", "0"},
                                       {"SLURM_LOCALID", "0"},
                                       {"SLURM_NODEID", "0"},
                                       {"SLURM_NTASKS", "1"},
                                       {"SLURM_NTASKS_PER_NODE", "2"},
                                       {"SLURM_TASKS_PER_NODE", "1"},
                                       {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                       {"SLURM_JOB_NODELIST", "vm"},
                                       {"SLURM_STEP_NODELIST", "vm"}}));
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_world_size, 1);
}

// A step on n2 of a job on n[1-2]: the master is the step's first node, not the job's.
TEST(DetectEnv, SlurmMasterIsTheStepsFirstNode) {
  const auto task = [](const char* procid, const char* localid) {
    return vars({{"SLURM_JOB_ID", "7"},
                 {"SLURM_STEP_ID", "1"},
                 {"SLURM_PROCID", procid},
                 {"SLURM_LOCALID", localid},
                 {"SLURM_NODEID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_NNODES", "1"},
                 {"SLURM_NTASKS_PER_NODE", "2"},
                 {"SLURM_TASKS_PER_NODE", "2"},
                 {"SLURM_STEP_TASKS_PER_NODE", "2"},
                 {"SLURM_JOB_NODELIST", "n[1-2]"},
                 {"SLURM_STEP_NODELIST", "n2"}});
  };
  const Env env = detect_env({}, task("1", "1"));
  EXPECT_EQ(env.master_addr, "n2");
  EXPECT_THAT(env.master_source, HasSubstr("SLURM_STEP_NODELIST"));
  EXPECT_EQ(env.local_world_size, 2);
  // Two steps of one job get different ports.
  auto other = task("1", "1");
  const auto step2 = [other](std::string_view name) -> std::optional<std::string> {
    return name == "SLURM_STEP_ID" ? std::optional<std::string>("2") : other(name);
  };
  EXPECT_NE(detect_env({}, step2).master_port, env.master_port);
  EXPECT_EQ(env.master_port, slurm_default_port("7", "1"));
}

// sbatch runs the batch script with the job's SLURM_NTASKS and SLURM_PROCID=0 but no step: a
// program started there without srun is not one of the job's tasks.
TEST(DetectEnv, SlurmBatchScriptWithoutSrunSaysWhatToDo) {
  auto batch = std::map<std::string, std::string, std::less<>>{
      {"SLURM_JOB_ID", "2"},       {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"},
      {"SLURM_NODEID", "0"},       {"SLURM_NTASKS", "2"}, {"SLURM_NTASKS_PER_NODE", "2"},
      {"SLURM_JOB_NODELIST", "vm"}};
  expect_error({}, vars(batch), "srun PROGRAM");
  batch["SLURM_NTASKS"] = "1";
  EXPECT_EQ(detect_env({}, vars(batch)).source, EnvSource::kSingle) << "one task: one process";
}

TEST(DetectEnv, ResolveErrorNamesWhatFailed) {
  EXPECT_EQ(resolve_error("127.0.0.1"), std::nullopt);
  EXPECT_EQ(resolve_error("localhost"), std::nullopt);
  EXPECT_NE(resolve_error("no-such-host.invalid"), std::nullopt);
}

TEST(DetectEnv, OpenMpi) {
  const Env env = detect_env({}, vars({{"OMPI_COMM_WORLD_RANK", "3"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                       {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_EQ(env.source, EnvSource::kOpenMpi);
  EXPECT_EQ(env.node_rank, 1);
  expect_error({}, vars({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
               "MASTER_ADDR");
}

TEST(DetectEnv, MalformedAndInconsistentValuesNameTheVariable) {
  expect_error({}, vars({{"RANK", "x"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}}), "RANK='x'");
  expect_error(
      {}, vars({{"RANK", "2"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
      "rank 2 is outside 0-1");
  expect_error({}, vars({{"RANK", "1"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}}), "MASTER_ADDR");
  expect_error({},
               vars({{"RANK", "1"},
                     {"LOCAL_RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"MASTER_PORT", "70000"}}),
               "70000");
  expect_error({},
               vars({{"SLURM_JOB_ID", "1"},
                     {"SLURM_STEP_ID", "0"},
                     {"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "1"}}),
               "SLURM_LOCALID");
  expect_error({},
               vars({{"SLURM_JOB_ID", "1"},
                     {"SLURM_STEP_ID", "0"},
                     {"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "0"},
                     {"SLURM_NTASKS_PER_NODE", "2(x"}}),
               "'2(x'");
}

TEST(SlurmLists, NodeListForms) {
  EXPECT_THAT(expand_slurm_nodelist("gpu[01-04,07],cpu3"),
              ElementsAre("gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "cpu3"));
  EXPECT_THAT(expand_slurm_nodelist("n1"), ElementsAre("n1"));
  EXPECT_THAT(expand_slurm_nodelist("r[1-2]n[8-9]"), ElementsAre("r1n8", "r1n9", "r2n8", "r2n9"));
  EXPECT_THAT(expand_slurm_nodelist("a[9-10]"), ElementsAre("a9", "a10"));
  for (const char* bad : {"gpu[01-", "gpu]", "gpu[4-2]", "gpu[a-b]", ""}) {
    EXPECT_THROW(expand_slurm_nodelist(bad), ConfigError) << bad;
  }
  EXPECT_THAT(expand_slurm_tasks_per_node("4(x2),3"), ElementsAre(4, 4, 3));
  EXPECT_THAT(expand_slurm_tasks_per_node("8"), ElementsAre(8));
}

}  // namespace
}  // namespace zeus::cluster
