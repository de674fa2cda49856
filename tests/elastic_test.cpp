// Elastic `zeus run` on loopback: several launchers (each a "node") with --nnodes MIN:MAX and
// --rdzv-backend c10d form one world, survive the loss of one, grow back when a newcomer joins,
// count failures against --max-restarts, and give up alone below MIN after join_timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.h"

namespace zeus {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::vector<std::string> elastic_node(int port, const std::string& nnodes,
                                      std::vector<std::string> extra,
                                      std::vector<std::string> worker) {
  std::vector<std::string> args{ZEUS_CLI_PATH,      "run",
                                "--nnodes",         nnodes,
                                "--nproc-per-node", "2",
                                "--rdzv-backend",   "c10d",
                                "--rdzv-endpoint",  "127.0.0.1:" + std::to_string(port),
                                "--rdzv-id",        "elastic-test",
                                "--local-addr",     "127.0.0.1"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(ZEUS_LAUNCH_WORKER_PATH);
  args.insert(args.end(), worker.begin(), worker.end());
  return args;
}

TEST(ElasticRun, ThreeNodesSurviveTheLossOfOneAndGrowBackWhenANewcomerJoins) {
  test::TempDir dir;
  const std::string finish = (dir.path() / "finish").string();
  const int port = test::free_port();
  const auto node = [&] {
    return elastic_node(port, "2:3", {"--rdzv-conf", "last_call_timeout=3,read_timeout=3"},
                        {"elastic", finish});
  };
  // a serves the rendezvous (it must outlive the test's loss); the last call (3 s) lets b and c,
  // started right after, join the first round even on a loaded machine.
  test::Child a(node());
  std::this_thread::sleep_for(300ms);
  test::Child b(node());
  test::Child c(node());
  for (auto* n : {&a, &b, &c}) {
    ASSERT_TRUE(n->wait_for_output("world=6 restart=0 nodes=3", 60s)) << "a world of 3 x 2";
  }
  c.kill(SIGKILL);  // a node's launcher dies; its workers go with it
  for (auto* n : {&a, &b}) {
    ASSERT_TRUE(n->wait_for_output("world=4 restart=1 nodes=2", 60s)) << "the survivors' world";
  }
  test::Child d(node());
  ASSERT_TRUE(d.wait_for_output("world=6 restart=0 nodes=3", 60s)) << "the newcomer's";
  for (auto* n : {&a, &b}) {
    ASSERT_TRUE(n->wait_for_output("world=6 restart=2 nodes=3", 60s)) << "grown back";
  }
  std::ofstream(finish) << "done\n";
  for (auto* n : {&a, &b, &d}) {
    const auto r = n->wait();
    EXPECT_EQ(r.exit_code, 0) << r.out;
  }
}

// A worker that joins a process group rejoins after a membership change: the C++ runtime
// (zeus::distributed::init) and PyTorch's own (init_process_group over env://), each a world of
// 2 x 2 that becomes 1 x 2 when a node's launcher dies.
class ElasticRejoin : public ::testing::TestWithParam<std::string> {};

TEST_P(ElasticRejoin, WorkersFormTheNewWorldAfterANodeLeaves) {
  test::TempDir dir;
  const std::string finish = (dir.path() / "finish").string();
  std::vector<std::string> worker{ZEUS_DIST_WORKER_PATH, "elastic", finish};
  std::map<std::string, std::string> env;
  if (GetParam() == "python") {
    if (test::run_process({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0) {
      GTEST_SKIP() << "/usr/bin/python3 has no torch (Debian's python3-torch)";
    }
    const fs::path script = dir.path() / "elastic.py";
    std::ofstream(script) << R"(import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
t = torch.ones(1)
dist.all_reduce(t)
print(f"elastic_sum={t.item():.0f} world={dist.get_world_size()} "
      f"restart={os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
)";
    worker = {script.string(), finish};
    env["ZEUS_PYTHON"] = "/usr/bin/python3";
  }
  const int port = test::free_port();
  const auto node = [&] {
    auto args = elastic_node(port, "1:2", {"--rdzv-conf", "last_call_timeout=3"}, {});
    args.pop_back();  // the launch worker: this test runs its own
    args.insert(args.end(), worker.begin(), worker.end());
    return args;
  };
  test::Child a(node(), env);
  std::this_thread::sleep_for(300ms);
  test::Child b(node(), env);
  ASSERT_TRUE(a.wait_for_output("elastic_sum=4 world=4 restart=0", 90s));
  ASSERT_TRUE(b.wait_for_output("elastic_sum=4 world=4 restart=0", 90s));
  b.kill(SIGKILL);
  ASSERT_TRUE(a.wait_for_output("elastic_sum=2 world=2 restart=1", 90s)) << "rejoined alone";
  std::ofstream(finish) << "done\n";
  const auto r = a.wait();
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Workers, ElasticRejoin, ::testing::Values("cpp", "python"));

// A failure restarts both nodes in a world of the same size: the energy job finds the power
// profile the first attempt saved (the global batch size names it) and does not profile again.
TEST(ElasticRun, ARestartInTheSameWorldReusesTheSavedPowerProfile) {
  test::TempDir dir;
  const fs::path log = dir.path() / "log";
  const std::map<std::string, std::string> env{{"ZEUS_DEVICE", "sim:v100"},
                                               {"ZEUS_PROFILE_PARAMS", "1,1"},
                                               {"ZEUS_TARGET_METRIC", "0.99"},
                                               {"ZEUS_LOG_DIR", log.string()}};
  const int port = test::free_port();
  auto node = elastic_node(port, "2:2", {"--max-restarts", "1"}, {});
  node.pop_back();  // this test's worker: 16 steps per rank and epoch, 7 limits in epoch 0
  node.insert(node.end(), {ZEUS_LOADER_WORKER_PATH, "--samples", "256", "--batch-size", "4",
                           "--max-epochs", "3", "--fail-first-attempt-at-epoch", "1"});
  test::Child a(node, env);
  std::this_thread::sleep_for(300ms);
  test::Child b(node, env);
  const auto ra = a.wait();
  const auto rb = b.wait();
  ASSERT_EQ(ra.exit_code, 0) << ra.out;
  ASSERT_EQ(rb.exit_code, 0) << rb.out;
  EXPECT_TRUE(fs::exists(log / "bs16.power.json")) << "4 ranks x 4";
  EXPECT_THAT(ra.out + rb.out, HasSubstr("epochs=3 samples=192 stop=max_epochs profiled=0"))
      << "the restarted job used the saved profile";
  EXPECT_THAT(ra.out + rb.out, ::testing::Not(HasSubstr("profiled=1")));
}

TEST(ElasticRun, FailuresCountAgainstMaxRestarts) {
  const int port = test::free_port();
  // Rank 0 exits 1 in every round: one restart is tolerated, the second failure ends the run.
  const auto node = elastic_node(port, "2:2", {"--max-restarts", "1", "--grace-period", "1s"},
                                 {"fail", "0", "1"});
  test::Child a(node);
  std::this_thread::sleep_for(300ms);
  const auto b = test::run_process(node, 120s);
  const auto first = a.wait();
  EXPECT_NE(first.exit_code, 0);
  EXPECT_NE(b.exit_code, 0);
  EXPECT_THAT(b.err, HasSubstr("exceed --max-restarts 1")) << b.err;
  EXPECT_THAT(b.err, HasSubstr("round 1:")) << "one restart happened: " << b.err;
}

TEST(ElasticRun, ANodeAloneBelowMinGivesUpAfterTheJoinTimeout) {
  const int port = test::free_port();
  const auto r =
      test::run_process(elastic_node(port, "2:3", {"--rdzv-conf", "join_timeout=1"}, {"env"}), 60s);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("1 node(s) joined, at least 2 needed"));
  EXPECT_EQ(r.out.find("RANK="), std::string::npos) << "no worker started";
}

// Two network namespaces joined by a veth pair, as two hosts: the rendezvous and the membership
// change cross a real (virtual) network. Skipped where namespaces cannot be made (not root).
class ElasticAcrossNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"}) {
      if (fs::exists(candidate)) {
        ip_ = candidate;
        break;
      }
    }
    if (ip_.empty() || ::geteuid() != 0) {
      GTEST_SKIP() << "network namespaces need root and iproute2";
    }
    const std::string id = std::to_string(::getpid() % 100000);
    ns_ = {"zeus-el-a" + id, "zeus-el-b" + id};
    subnet_ = "10.231." + std::to_string(::getpid() % 250) + ".";
    const std::string veth_a = "zva" + id, veth_b = "zvb" + id;
    const std::vector<std::vector<std::string>> steps{
        {ip_, "netns", "add", ns_[0]},
        {ip_, "netns", "add", ns_[1]},
        {ip_, "link", "add", veth_a, "type", "veth", "peer", "name", veth_b},
        {ip_, "link", "set", veth_a, "netns", ns_[0]},
        {ip_, "link", "set", veth_b, "netns", ns_[1]},
        {ip_, "-n", ns_[0], "addr", "add", subnet_ + "1/24", "dev", veth_a},
        {ip_, "-n", ns_[1], "addr", "add", subnet_ + "2/24", "dev", veth_b},
        {ip_, "-n", ns_[0], "link", "set", veth_a, "up"},
        {ip_, "-n", ns_[1], "link", "set", veth_b, "up"},
        {ip_, "-n", ns_[0], "link", "set", "lo", "up"},
        {ip_, "-n", ns_[1], "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      const auto r = test::run_process(step, 20s);
      if (r.exit_code != 0) {
        GTEST_SKIP() << "cannot make the namespaces here (" << step[1] << " " << step[2]
                     << "): " << r.err;
      }
    }
  }
  void TearDown() override {
    for (const auto& ns : ns_) {
      test::run_process({ip_, "netns", "del", ns}, 20s);  // takes its veth end along
    }
  }
  std::vector<std::string> node(int which, const std::string& finish) {
    auto args = elastic_node(29555, "1:2", {"--rdzv-conf", "last_call_timeout=3,read_timeout=3"},
                             {"elastic", finish});
    // This namespace's address, and the endpoint on namespace a.
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--rdzv-endpoint") {
        args[i + 1] = subnet_ + "1:29555";
      } else if (args[i] == "--local-addr") {
        args[i + 1] = subnet_ + std::to_string(which + 1);
      }
    }
    args.insert(args.begin(), {ip_, "netns", "exec", ns_[static_cast<size_t>(which)]});
    return args;
  }

  std::string ip_;
  std::vector<std::string> ns_;
  std::string subnet_;
};

TEST_F(ElasticAcrossNamespaces, TwoHostsFormOneWorldAndTheSurvivorContinuesAlone) {
  test::TempDir dir;
  const std::string finish = (dir.path() / "finish").string();
  test::Child a(node(0, finish));
  std::this_thread::sleep_for(300ms);
  test::Child b(node(1, finish));
  ASSERT_TRUE(a.wait_for_output("world=4 restart=0 nodes=2", 60s));
  ASSERT_TRUE(b.wait_for_output("world=4 restart=0 nodes=2", 60s));
  EXPECT_TRUE(a.wait_for_output("master=" + subnet_, 5s)) << "node 0's address in its namespace";
  b.kill(SIGKILL);  // `ip netns exec` runs zeus run itself: the second host's launcher dies
  ASSERT_TRUE(a.wait_for_output("world=2 restart=1 nodes=1", 60s)) << "the survivor, alone";
  std::ofstream(finish) << "done\n";
  const auto r = a.wait();
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace
}  // namespace zeus
