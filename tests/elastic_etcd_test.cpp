// Elastic `zeus run` without a single point of failure, with real processes: launchers over a
// real 3-member etcd cluster on loopback lose their first node and go on, grow back, shrug off
// the loss of an etcd member, and stop cleanly (limits restored) when all of etcd is gone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/etcd_cluster.h"
#include "support/test_support.h"

namespace zeus {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kDefaultLimitMw = 300'000;
constexpr const char* kLimitMw = "200000";

// One node: its own fake GPU (an A40 whose limit its worker lowers), log directory and mark.
struct EtcdNode {
  EtcdNode(const test::TempDir& dir, const std::string& name)
      : gpu(std::make_unique<test::FakeNvml>(std::vector<test::FakeGpu>{test::FakeGpu{}})),
        log_dir(dir / name),
        mark(test::new_mark()) {
    fs::create_directories(log_dir);
  }
  std::map<std::string, std::string> env() const {
    return {{"FAKE_NVML_STATE", gpu->state_path().string()},
            {"ZEUS_LOG_DIR", log_dir.string()},
            {"ZEUS_TEST_MARK", mark}};
  }
  // The node dies whole, as its machine would: launcher, sentinel and workers at once.
  void die() const {
    for (int pid : test::marked(mark)) {
      ::kill(pid, SIGKILL);
    }
  }
  std::unique_ptr<test::FakeNvml> gpu;
  fs::path log_dir;
  std::string mark;
  std::unique_ptr<test::Child> launcher;
};

TEST(ElasticEtcd, AnyNodeAndAnEtcdMemberMayDieAndWithoutEtcdTheLaunchersStopCleanly) {
  test::EtcdCluster etcd({.members = 3});
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  test::TempDir dir;
  const std::string finish = (dir.path() / "finish").string();
  std::vector<std::unique_ptr<EtcdNode>> nodes;
  const auto start = [&](const std::string& name) {
    nodes.push_back(std::make_unique<EtcdNode>(dir, name));
    EtcdNode& n = *nodes.back();
    n.launcher =
        std::make_unique<test::Child>(std::vector<std::string>{ZEUS_CLI_PATH,
                                                               "run",
                                                               "--nnodes",
                                                               "2:3",
                                                               "--nproc-per-node",
                                                               "1",
                                                               "--rdzv-backend",
                                                               "etcd",
                                                               "--rdzv-endpoint",
                                                               etcd.endpoints(),
                                                               "--rdzv-id",
                                                               "elastic-etcd",
                                                               "--local-addr",
                                                               "127.0.0.1",
                                                               "--grace-period",
                                                               "2s",
                                                               "--rdzv-conf",
                                                               "last_call_timeout=2,read_timeout=3",
                                                               ZEUS_LAUNCH_WORKER_PATH,
                                                               "elastic-limit",
                                                               finish,
                                                               "nvml",
                                                               kLimitMw},
                                      n.env(), test::Child::Stderr::kMerged);
    return &n;
  };
  EtcdNode* first = start("a");
  start("b");
  start("c");
  for (auto& n : nodes) {
    ASSERT_TRUE(n->launcher->wait_for_output("world=3 restart=0 nodes=3", 60s))
        << n->launcher->output();
  }
  // The first node (it started the run in etcd) dies with its workers: the others go on.
  first->die();
  for (size_t i : {1u, 2u}) {
    ASSERT_TRUE(nodes[i]->launcher->wait_for_output("world=2 restart=1 nodes=2", 60s))
        << nodes[i]->launcher->output();
  }
  EXPECT_THAT(nodes[1]->launcher->output() + nodes[2]->launcher->output(), HasSubstr("left"));
  // A fourth node joins: the world grows back.
  start("d");
  ASSERT_TRUE(nodes[3]->launcher->wait_for_output("world=3 restart=0 nodes=3", 60s))
      << nodes[3]->launcher->output();
  for (size_t i : {1u, 2u}) {
    ASSERT_TRUE(nodes[i]->launcher->wait_for_output("world=3 restart=2 nodes=3", 60s))
        << nodes[i]->launcher->output();
  }
  // One etcd member dies (the first endpoint, where every gateway was): nothing restarts.
  etcd.kill(0);
  std::this_thread::sleep_for(5s);
  for (size_t i : {1u, 2u, 3u}) {
    nodes[i]->launcher->wait_for_output("restart=3", 1s);
    EXPECT_THAT(nodes[i]->launcher->output(), Not(HasSubstr("restart=3")))
        << nodes[i]->launcher->output();
    EXPECT_EQ(nodes[i]->gpu->limit_mw(0), 200'000) << "its worker runs on";
  }
  // All of etcd is gone: every launcher stops its workers, says why, and exits.
  etcd.kill_all();
  for (size_t i : {1u, 2u, 3u}) {
    const auto r = nodes[i]->launcher->wait();
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("answered nothing for")) << r.out;
    EXPECT_THAT(r.out, HasSubstr(etcd.endpoint(2))) << "names the endpoints: " << r.out;
    EXPECT_EQ(nodes[i]->gpu->limit_mw(0), kDefaultLimitMw) << "limits restored: " << r.out;
    EXPECT_FALSE(fs::exists(nodes[i]->log_dir / "power-limits.journal")) << r.out;
  }
  std::ofstream(finish) << "done\n";
  while (!nodes.empty()) {
    nodes.pop_back();  // the fake GPUs' environments unwind in order
  }
}

}  // namespace
}  // namespace zeus
