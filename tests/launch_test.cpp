// `zeus run`: the launch plan (torchrun's environment contract, validation) in process, and the
// supervisor through the real binary: teardown, exit codes, signals, restarts, output, journal.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "support/test_support.h"
#include "zeus/cluster/slurm.h"
#include "zeus/common/errors.h"
#include "zeus/launch/launch_options.h"
#include "zeus/launch/line_splitter.h"

namespace zeus::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

LaunchContext test_context(std::map<std::string, std::string> env = {}) {
  LaunchContext c;
  c.env = [env](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
  c.cpu_count = 8;
  c.count_gpus = [] { return 4; };
  c.find_program = [](const std::string& p) { return p == "missing" ? "" : "/bin/" + p; };
  c.port_busy = [](const std::string&, int port) -> std::optional<std::string> {
    if (port == 29501)
      return "it is already in use by pid 42 (python3)";
    return std::nullopt;
  };
  c.free_port = [](const std::string&) { return 45678; };
  return c;
}

LaunchOptions options(std::vector<std::string> command = {"train"}) {
  LaunchOptions o;
  o.command = std::move(command);
  o.run_id = "test";
  return o;
}

TEST(LaunchPlan, TorchrunEnvironmentForTwoNodesOfTwo) {
  LaunchOptions o = options();
  o.nproc_per_node = "2";
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  o.master_port = 29501;  // busy here, but only node 0 serves it
  const LaunchPlan plan = resolve(o, test_context());
  ASSERT_EQ(plan.workers.size(), 2u);
  EXPECT_EQ(plan.world_size, 4);
  const auto& w = plan.workers[1];
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.env.at("RANK"), "3");
  EXPECT_EQ(w.env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(w.env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(w.env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(w.env.at("GROUP_RANK"), "1");
  EXPECT_EQ(w.env.at("ROLE_RANK"), "3");
  EXPECT_EQ(w.env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(w.env.at("MASTER_PORT"), "29501");
  EXPECT_EQ(w.env.at("OMP_NUM_THREADS"), "4") << "8 cores / 2 workers";
  EXPECT_EQ(w.env.at("TORCHELASTIC_RUN_ID"), "test");
  EXPECT_EQ(w.argv, (std::vector<std::string>{"/bin/train"}));
  EXPECT_EQ(attempt_env(w, 2).at("ZEUS_RESTART_COUNT"), "2");
  EXPECT_EQ(attempt_env(w, 2).at("TORCHELASTIC_RESTART_COUNT"), "2");
}

TEST(LaunchPlan, PythonScriptsLocalRankArgDevicesAndThreads) {
  test::TempDir dir;
  const auto script = (dir.path() / "train.py").string();
  std::ofstream(script) << "print()\n";
  LaunchOptions o = options({script, "--lr", "0.1"});
  o.nproc_per_node = "auto";
  o.local_rank_arg = true;
  o.devices = {"0", "1", "4", "6"};
  o.omp_num_threads = 3;
  LaunchPlan plan = resolve(o, test_context({{"OMP_NUM_THREADS", "7"}}));
  ASSERT_EQ(plan.workers.size(), 4u) << "auto: one per visible GPU";
  EXPECT_EQ(plan.workers[2].argv,
            (std::vector<std::string>{"/bin/python3", script, "--local_rank=2", "--lr", "0.1"}));
  EXPECT_EQ(plan.workers[2].env.at("CUDA_VISIBLE_DEVICES"), "4");
  EXPECT_EQ(plan.workers[2].env.at("OMP_NUM_THREADS"), "3") << "the flag wins";

  o.omp_num_threads.reset();
  o.devices_per_worker_all = true;
  plan = resolve(o, test_context({{"OMP_NUM_THREADS", "7"}}));
  EXPECT_EQ(plan.workers[0].env.count("OMP_NUM_THREADS"), 0u) << "the user's value is inherited";
  EXPECT_EQ(plan.workers[0].env.at("CUDA_VISIBLE_DEVICES"), "0,1,4,6");

  o = options({"train"});
  o.module = true;
  o.nproc_per_node = "cpu";
  plan = resolve(o, test_context());
  EXPECT_EQ(plan.workers.size(), 8u);
  EXPECT_EQ(plan.workers[0].argv, (std::vector<std::string>{"/bin/python3", "-m", "train"}));
}

TEST(LaunchPlan, StandaloneAndSlurm) {
  LaunchOptions o = options();
  o.standalone = true;
  EXPECT_EQ(resolve(o, test_context()).master_port, 45678);

  o = options();
  o.slurm = true;
  o.nproc_per_node = "2";
  // `srun -N3 --ntasks-per-node 1 zeus run --slurm`, as Slurm 22.05 sets it for node 2's task.
  std::map<std::string, std::string> task{{"SLURM_JOB_ID", "1234"},
                                          {"SLURM_STEP_ID", "0"},
                                          {"SLURM_NNODES", "3"},
                                          {"SLURM_NODEID", "2"},
                                          {"SLURM_NTASKS", "3"},
                                          {"SLURM_NTASKS_PER_NODE", "4"},
                                          {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
                                          {"SLURM_JOB_NODELIST", "gpu[06-09]"},
                                          {"SLURM_STEP_NODELIST", "gpu[07-09]"}};
  LaunchPlan plan = resolve(o, test_context(task));
  EXPECT_EQ(plan.nnodes, 3);
  EXPECT_EQ(plan.node_rank, 2);
  EXPECT_EQ(plan.master_addr, "gpu07") << "the step's first node, not the job's";
  EXPECT_EQ(plan.master_port, cluster::slurm_default_port("1234", "0"));
  EXPECT_EQ(plan.workers[1].rank, 5);
  // MASTER_ADDR from the environment wins, as on the direct path.
  task["MASTER_ADDR"] = "10.1.2.3";
  EXPECT_EQ(resolve(o, test_context(task)).master_addr, "10.1.2.3");
  task.erase("MASTER_ADDR");
  // Two launchers on one node (`srun -N1 -n2 zeus run --slurm`) are refused up front.
  task["SLURM_STEP_TASKS_PER_NODE"] = "2,1,1";
  task["SLURM_NODEID"] = "0";
  try {
    resolve(o, test_context(task));
    FAIL() << "two launchers on a node";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("srun --ntasks-per-node 1"));
  }
  // The batch script of a multi-node job, without srun.
  task.erase("SLURM_STEP_ID");
  task.erase("SLURM_STEP_TASKS_PER_NODE");
  try {
    resolve(o, test_context(task));
    FAIL() << "batch script without srun";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch script"));
  }
  // An unresolvable master is an error before anything starts, on every node.
  task["SLURM_STEP_ID"] = "0";
  task["SLURM_STEP_TASKS_PER_NODE"] = "1(x3)";
  task["SLURM_NODEID"] = "1";
  LaunchContext unresolvable = test_context(task);
  unresolvable.resolve_error = [](const std::string& host) -> std::optional<std::string> {
    return host == "gpu07" ? std::optional<std::string>("Name or service not known") : std::nullopt;
  };
  try {
    resolve(o, unresolvable);
    FAIL() << "unresolvable master";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'gpu07' (from the first node of SLURM_STEP_NODELIST)"));
    EXPECT_THAT(e.what(), HasSubstr("Name or service not known"));
  }

  try {
    resolve(o, test_context());
    FAIL() << "--slurm outside Slurm must fail";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("SLURM_JOB_ID"));
  }
}

TEST(LaunchPlan, BadInputIsAConfigErrorNamingTheFlag) {
  const auto error_of = [](LaunchOptions o) {
    try {
      resolve(o, test_context());
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LaunchOptions o = options({});
  EXPECT_THAT(error_of(o), HasSubstr("no program"));
  o = options({"missing"});
  EXPECT_THAT(error_of(o), HasSubstr("'missing' not found"));
  o = options();
  o.nproc_per_node = "0";
  EXPECT_THAT(error_of(o), HasSubstr("--nproc-per-node"));
  o.nproc_per_node = "two";
  EXPECT_THAT(error_of(o), HasSubstr("--nproc-per-node"));
  o = options();
  o.nnodes = 2;
  o.node_rank = 2;
  EXPECT_THAT(error_of(o), HasSubstr("--node-rank 2 is outside 0..1"));
  o = options();
  o.master_port = 29501;
  EXPECT_THAT(error_of(o), HasSubstr("pid 42 (python3)"));
  o = options();
  o.tee = "5";
  EXPECT_THAT(error_of(o), HasSubstr("--tee"));
  o = options();
  o.nproc_per_node = "4";
  o.devices = {"0", "1"};
  EXPECT_THAT(error_of(o), HasSubstr("--devices lists 2"));
  o = options({"nope.py"});
  EXPECT_THAT(error_of(o), HasSubstr("script 'nope.py' not found"));
}

TEST(StreamSelection, TorchrunSyntax) {
  EXPECT_EQ(parse_stream_selection("3", "--tee").bits_for(5), 3);
  const auto per_rank = parse_stream_selection("0:1,2:2", "--tee");
  EXPECT_EQ(per_rank.bits_for(0), 1);
  EXPECT_EQ(per_rank.bits_for(1), 0);
  EXPECT_EQ(per_rank.bits_for(2), 2);
  EXPECT_THROW(parse_stream_selection("0:x", "--tee"), ConfigError);
}

TEST(LineSplitter, WholeLinesAcrossReadsAndBoundedPieces) {
  std::vector<std::string> lines;
  const auto sink = [&](std::string_view l) { lines.emplace_back(l); };
  LineSplitter splitter(8);
  splitter.feed("ab", sink);
  splitter.feed("c\nde\n\nf", sink);
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "de", ""}));
  splitter.feed("0123456789\n", sink);  // "f" + 10 characters: one piece of 8, then the rest
  EXPECT_EQ(lines.at(3), "f0123456");
  EXPECT_EQ(lines.at(4), "789");
  splitter.feed("tail", sink);
  splitter.finish(sink);
  EXPECT_EQ(lines.back(), "tail");
}

// ---- through the zeus binary ----

std::vector<std::string> zeus_run(std::vector<std::string> args) {
  args.insert(args.begin(), {ZEUS_CLI_PATH, "run"});
  return args;
}

// Processes of process group `pgid` that are still running (not zombies).
std::vector<int> live_members(int pgid) {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string content;
    if (!std::getline(stat, content))
      continue;
    // pid (comm) state ppid pgrp ...
    const size_t close = content.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(content.substr(close + 2));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z')
      pids.push_back(std::stoi(entry.path().filename()));
  }
  return pids;
}

bool gone_within(int pid, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string content;
    if (!std::getline(stat, content))
      return true;
    const size_t close = content.rfind(')');
    if (close != std::string::npos && content[close + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(ZeusRun, EnvironmentContractOneNodeOfThree) {
  const int port = test::free_port();
  const auto r = test::run_process(
      zeus_run({"--nproc-per-node", "3", "--master-port", std::to_string(port), "--local-rank-arg",
                "--omp-num-threads", "2", ZEUS_LAUNCH_WORKER_PATH, "env", "extra"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ranks = test::by_rank(r.out);
  ASSERT_EQ(ranks.size(), 3u) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    const auto& env = ranks.at(rank);
    EXPECT_EQ(env.at("RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(env.at("WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("GROUP_RANK"), "0");
    EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(port));
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "2");
    EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(env.at("LOCAL_RANK_ARG"), std::to_string(rank));
    EXPECT_EQ(env.at("ARGS"), "extra");
    EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), ranks.at(0).at("TORCHELASTIC_RUN_ID"));
  }
}

TEST(ZeusRun, TwoLaunchersFormTwoNodesOfTwo) {
  const int port = test::free_port();
  std::vector<std::unique_ptr<test::Child>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<test::Child>(
        zeus_run({"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc_per_node", "2",
                  "--master_addr", "127.0.0.1", "--master_port", std::to_string(port),
                  ZEUS_LAUNCH_WORKER_PATH, "env"})));
  }
  for (int node = 0; node < 2; ++node) {
    const auto r = nodes[node]->wait();
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto ranks = test::by_rank(r.out);
    ASSERT_EQ(ranks.size(), 2u) << r.out;
    for (int local = 0; local < 2; ++local) {
      const auto& env = ranks.at(node * 2 + local);
      EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(env.at("WORLD_SIZE"), "4");
      EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(node));
      EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
      EXPECT_EQ(env.at("MASTER_PORT"), std::to_string(port));
    }
  }
}

TEST(ZeusRun, StandalonePicksAFreePort) {
  const auto r = test::run_process(
      zeus_run({"--standalone", "--nproc-per-node", "2", ZEUS_LAUNCH_WORKER_PATH, "env"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ranks = test::by_rank(r.out);
  EXPECT_EQ(ranks.at(0).at("MASTER_PORT"), ranks.at(1).at("MASTER_PORT"));
  EXPECT_NE(ranks.at(0).at("MASTER_PORT"), "29500");
}

TEST(ZeusRun, FirstFailureStopsTheRunAndLeavesNoProcess) {
  const auto r =
      test::run_process(zeus_run({"--nproc-per-node", "3", "--standalone", "--grace-period", "5s",
                                  ZEUS_LAUNCH_WORKER_PATH, "fail", "1", "3"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 1 (local rank 1, pid "));
  EXPECT_THAT(r.err, HasSubstr("exited with code 3"));
  EXPECT_THAT(r.err, HasSubstr("[1] failing on purpose")) << "the summary quotes its output";
  std::set<int> groups;
  static const std::regex kPgid(R"(\[(\d)\] pgid=(\d+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), kPgid);
       it != std::sregex_iterator(); ++it) {
    groups.insert(std::stoi((*it)[2]));
  }
  ASSERT_EQ(groups.size(), 2u) << "ranks 0 and 2, each in its own group: " << r.out;
  for (const int pgid : groups) {
    EXPECT_THAT(live_members(pgid), ::testing::IsEmpty()) << "process group " << pgid;
  }
}

TEST(ZeusRun, WorkerKilledBySignalGives128PlusSignal) {
  const auto r = test::run_process(
      zeus_run({"--nproc-per-node", "2", "--standalone", ZEUS_LAUNCH_WORKER_PATH, "sigkill", "0"}));
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0 (local rank 0"));
  EXPECT_THAT(r.err, HasSubstr("was killed by SIGKILL"));
}

TEST(ZeusRun, SigtermIsForwardedAndTheLauncherExitsAfterTheWorkers) {
  test::Child launcher(
      zeus_run({"--nproc-per-node", "2", "--standalone", ZEUS_LAUNCH_WORKER_PATH, "trap"}));
  ASSERT_TRUE(launcher.wait_for_output("[0] ready", std::chrono::seconds(20)));
  ASSERT_TRUE(launcher.wait_for_output("[1] ready", std::chrono::seconds(20)));
  launcher.kill(SIGTERM);
  const auto r = launcher.wait();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_THAT(r.out, HasSubstr("[0] rank 0 got SIGTERM"));
  EXPECT_THAT(r.out, HasSubstr("[1] rank 1 got SIGTERM"));
}

TEST(ZeusRun, WorkersDieWithAKilledLauncher) {
  test::Child launcher(
      zeus_run({"--nproc-per-node", "2", "--standalone", ZEUS_LAUNCH_WORKER_PATH, "sleep"}));
  ASSERT_TRUE(launcher.wait_for_output("[0] pid=", std::chrono::seconds(20)));
  ASSERT_TRUE(launcher.wait_for_output("[1] pid=", std::chrono::seconds(20)));
  launcher.kill(SIGKILL);
  const auto r = launcher.wait();
  ASSERT_EQ(r.signal, SIGKILL);
  const auto ranks = test::by_rank(r.out);
  for (int rank = 0; rank < 2; ++rank) {
    const int pid = std::stoi(ranks.at(rank).at("pid"));
    EXPECT_TRUE(gone_within(pid, std::chrono::seconds(10))) << "rank " << rank << " pid " << pid;
  }
}

// The sentinel is one of the launcher's children, reaped by it alone: when it dies, the launcher
// says so and starts another, which then cleans up after a killed launcher as the first would.
// (Before: the supervisor's waitpid(-1) reaped it unnoticed, and a launcher killed later left its
// workers running.)
TEST(ZeusRun, ADeadSentinelIsNoticedAndReplaced) {
  const std::string mark = test::new_mark();
  test::Child launcher(
      {"/bin/sh", "-c",
       "exec " + std::string(ZEUS_CLI_PATH) + " run --standalone --grace-period 2s " +
           ZEUS_LAUNCH_WORKER_PATH + " sleep 2>&1"},
      {{"ZEUS_TEST_MARK", mark}});
  ASSERT_TRUE(launcher.wait_for_output("[0] pid=", std::chrono::seconds(20)));
  // The sentinel: the launcher's child in a session of its own.
  const auto sentinels = [&] {
    std::vector<int> found;
    for (int pid : test::marked(mark)) {
      if (pid != launcher.pid() && ::getsid(pid) == pid) {
        found.push_back(pid);
      }
    }
    return found;
  };
  // The guardian program, started by exec: a fork of the launcher (which runs threads by the
  // time it replaces one) could deadlock in the child before it ever watched.
  const auto runs_the_guardian = [](int pid) {
    std::ifstream in(fmt::format("/proc/{}/cmdline", pid));
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    return cmdline.find(std::string("__guardian") + '\0' + "--pipe-fd") != std::string::npos;
  };
  const std::vector<int> first = sentinels();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(runs_the_guardian(first[0]));
  ::kill(first[0], SIGKILL);
  ASSERT_TRUE(launcher.wait_for_output(
      fmt::format("the sentinel (pid {}) was killed by signal 9 (SIGKILL); started another",
                  first[0]),
      std::chrono::seconds(20)));
  ASSERT_TRUE(
      test::eventually([&] { return sentinels().size() == 1 && sentinels()[0] != first[0]; },
                       std::chrono::seconds(10)));
  EXPECT_TRUE(runs_the_guardian(sentinels()[0]));
  launcher.kill(SIGKILL);
  const auto r = launcher.wait();
  const int worker = std::stoi(test::by_rank(r.out).at(0).at("pid"));
  EXPECT_TRUE(gone_within(worker, std::chrono::seconds(15))) << r.out;
  EXPECT_TRUE(
      test::eventually([&] { return test::marked(mark).empty(); }, std::chrono::seconds(15)))
      << "left: " << ::testing::PrintToString(test::marked(mark));
}

TEST(ZeusRun, MaxRestartsRunsAgainUntilSuccessWithPerAttemptLogs) {
  test::TempDir logs;
  const auto r = test::run_process(
      zeus_run({"--max-restarts", "2", "--nproc-per-node", "2", "--standalone", "--log-dir",
                logs.path().string(), ZEUS_LAUNCH_WORKER_PATH, "restart"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_THAT(r.out, HasSubstr("[0] restart_count=" + std::to_string(attempt)));
    std::ifstream log(logs.path() / ("attempt_" + std::to_string(attempt)) / "1" / "stdout.log");
    std::string line;
    std::getline(log, line);
    EXPECT_EQ(line, "restart_count=" + std::to_string(attempt)) << "attempt " << attempt;
  }
  EXPECT_THAT(r.err, HasSubstr("restarting all workers (restart 2 of 2)"));

  const auto exhausted = test::run_process(
      zeus_run({"--max-restarts", "1", "--standalone", ZEUS_LAUNCH_WORKER_PATH, "restart"}));
  EXPECT_EQ(exhausted.exit_code, 1) << "fails on attempts 0 and 1, no restart left";
}

TEST(ZeusRun, LinesOfConcurrentWorkersAreNeverSplit) {
  const auto r = test::run_process(zeus_run(
      {"--nproc-per-node", "3", "--standalone", ZEUS_LAUNCH_WORKER_PATH, "spam", "400", "5000"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::map<int, int> count;
  static const std::regex kSpam(R"(\[(\d)\] (\d):(\d+):(x+))");
  while (std::getline(in, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, kSpam)) << line.substr(0, 80);
    EXPECT_EQ(m[1], m[2]) << "a line carries its own rank's prefix";
    EXPECT_EQ(m[4].length(), 5000);
    ++count[std::stoi(m[1])];
  }
  EXPECT_EQ(count, (std::map<int, int>{{0, 400}, {1, 400}, {2, 400}}));
}

TEST(ZeusRun, RestoresPowerLimitsAWorkerLeftLowered) {
  test::FakeNvml fake(test::four_a40s());
  const int64_t before = fake.limit_mw(0);
  test::TempDir logs;
  const auto r = test::run_process(
      zeus_run({"--nproc-per-node", "2", "--standalone", "--log-dir", logs.path().string(),
                ZEUS_LAUNCH_WORKER_PATH, "limits", "nvml", "150000"}));
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[1] limited"));
  const auto history = fake.limit_history();
  ASSERT_GE(history.size(), 2u);
  EXPECT_EQ(history.front().second, 150'000) << "the worker lowered it";
  EXPECT_EQ(fake.limit_mw(0), before) << "zeus run put it back";
  EXPECT_THAT(r.err, HasSubstr("restored the power limits"));
  EXPECT_FALSE(std::filesystem::exists(logs.path() / "power-limits.journal"));
}

TEST(ZeusRun, BadInputExitsTwoBeforeAnyWorkerStarts) {
  const auto expect_usage = [](std::vector<std::string> args, const std::string& message) {
    const auto r = test::run_process(zeus_run(std::move(args)));
    EXPECT_EQ(r.exit_code, 2) << message << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_THAT(r.out, Not(HasSubstr("[0]")));
  };
  expect_usage({"--bogus", ZEUS_LAUNCH_WORKER_PATH}, "bogus");
  expect_usage({"--nproc-per-node", "2"}, "no program");
  expect_usage({"/nonexistent/program"}, "'/nonexistent/program' not found");
  expect_usage({"--nproc-per-node", "0", ZEUS_LAUNCH_WORKER_PATH, "env"}, "--nproc-per-node");
  expect_usage({"--nnodes", "2", "--node-rank", "2", ZEUS_LAUNCH_WORKER_PATH, "env"},
               "--node-rank 2 is outside 0..1");

  // A port held by this test process: the message names us.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  expect_usage({"--master-port", port, ZEUS_LAUNCH_WORKER_PATH, "env"},
               "in use by pid " + std::to_string(::getpid()));
  ::close(fd);
}

TEST(ZeusRun, RunsAnUnchangedPyTorchScriptLikeTorchrun) {
  if (test::run_process({"/usr/bin/python3", "-c", "import torch.distributed"}).exit_code != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (apt install python3-torch)";
  }
  const std::string script = ZEUS_TEST_DATA_DIR "/gloo_allreduce.py";
  test::ScopedEnv python("ZEUS_PYTHON", "/usr/bin/python3");  // the one with python3-torch
  const auto ours = test::run_process(zeus_run({"--nproc-per-node", "2", "--standalone", script}));
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  // torchrun 1.13 on Python 3.11 fails on plain --redirects/--tee values, its default "0"
  // included (Python 3.11 no longer iterates the zero and alias members of its Std IntFlag); a
  // per-rank map naming a rank that does not exist ("7:1") sidesteps that and redirects nothing.
  test::TempDir logs;
  const auto theirs =
      test::run_process({"/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", "2",
                         "--master_port", std::to_string(test::free_port()), "--log_dir",
                         logs.path().string(), "--redirects", "7:1", "--tee", "7:1", script});
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  static const std::regex kResult(R"((rank=\d world=\d local_rank=\d sum=[0-9.]+))");
  const auto results = [](const std::string& text) {
    std::set<std::string> found;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kResult);
         it != std::sregex_iterator(); ++it) {
      found.insert((*it)[1]);
    }
    return found;
  };
  const std::set<std::string> expected{"rank=0 world=2 local_rank=0 sum=3.0",
                                       "rank=1 world=2 local_rank=1 sum=3.0"};
  EXPECT_EQ(results(ours.out), expected) << ours.out;
  EXPECT_EQ(results(theirs.out), expected) << theirs.out;
}

}  // namespace
}  // namespace zeus::launch
