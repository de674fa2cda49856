// zeus::DataLoader end to end: 2 ranks under `zeus run` on simulated V100s (virtual clock) or
// the fake NVML library, driven by support/loader_worker.cpp. Checks the profiling schedule
// against the simulated trace, the files, the limits' restoration, early stop, the saved
// profile, observer mode, multi-node roles, and bad input.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "loader_jobs.h"
#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/contract/train_result.h"
#include "zeus/device/discovery.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

TEST(DataLoaderEndToEnd, ProfilesEveryLimitOncePicksTheTraceOptimumAndRestores) {
  test::TempDir dir;
  const fs::path log = dir / "log";
  const Expected expected = expected_from_trace(0.5);
  ASSERT_LE(expected.candidates.size() * 7, 100u) << "profiling must fit in one epoch";

  Job job = run_job(sim_env(log), {"--max-epochs", "5", "--metrics", "0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  EXPECT_EQ(count(job.output, "epochs=2 samples=800 stop=target_reached"), 2) << job.output;

  // Files: one profile, one result, a power log per GPU and epoch; no journal left behind.
  const std::string result_name = "zeus+bs8.train.json";
  std::vector<std::string> names = files_in(log);
  std::erase_if(names, [](const std::string& n) { return n.starts_with(".sim-"); });
  EXPECT_EQ(names, (std::vector<std::string>{"bs8+e0+gpu0.power.log", "bs8+e0+gpu1.power.log",
                                             "bs8+e1+gpu0.power.log", "bs8+e1+gpu1.power.log",
                                             "bs8.power.json", result_name}));
  // Written by the global master alone: one "saved" line per file in the whole job's output.
  EXPECT_EQ(count(job.output, "saved " + (log / result_name).string()), 1) << job.output;
  EXPECT_EQ(count(job.output, "saved " + (log / "bs8.power.json").string()), 1) << job.output;

  // Every limit profiled exactly once, from the maximum down.
  const contract::TrainResult r = contract::load_train_result(log / result_name);
  ASSERT_EQ(r.windows.size(), expected.candidates.size());
  for (size_t i = 0; i < r.windows.size(); ++i) {
    EXPECT_EQ(r.windows[i].power_limit_mw, expected.candidates[i]);
    EXPECT_EQ(r.windows[i].epoch, 0);
    EXPECT_LT(r.windows[i].begin_unix_ns, r.windows[i].end_unix_ns);
  }
  // The measurements are the trace's, and so is the choice.
  const nlohmann::json profile = read_json(log / "bs8.power.json");
  ASSERT_EQ(profile["train_throughput"].size(), expected.candidates.size()) << profile.dump();
  for (const auto& m : expected.measurements) {
    const std::string key = std::to_string(m.power_limit_mw / 1000);
    EXPECT_NEAR(profile["train_throughput"][key].get<double>(), m.throughput_ips,
                1e-6 * m.throughput_ips)
        << key;
    EXPECT_NEAR(profile["train_power"][key].get<double>(), m.power_w, 1e-3 * m.power_w) << key;
  }
  EXPECT_EQ(profile["optimal_pl"].get<double>() * 1000, static_cast<double>(expected.optimal_mw));
  ASSERT_TRUE(r.optimal_power_limit_mw);
  EXPECT_EQ(*r.optimal_power_limit_mw, expected.optimal_mw);
  EXPECT_TRUE(r.reached);
  EXPECT_EQ(r.num_epochs, 2);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_TRUE(r.profiled);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.epochs[0].train_iterations, 100);
  EXPECT_EQ(r.epochs[1].power_limit_mw, expected.optimal_mw);
  EXPECT_NEAR(r.energy_j,
              r.epochs[0].train_energy_j + r.epochs[0].eval_energy_j + r.epochs[1].train_energy_j +
                  r.epochs[1].eval_energy_j,
              1e-6 * r.energy_j);
  // Epoch 1 ran 100 steps at the optimum on each of 2 GPUs: its energy is the trace's.
  const auto& at_opt =
      *std::find_if(expected.measurements.begin(), expected.measurements.end(),
                    [&](const auto& m) { return m.power_limit_mw == expected.optimal_mw; });
  EXPECT_NEAR(r.epochs[1].train_time_s, 100 / at_opt.throughput_ips,
              1e-6 * r.epochs[1].train_time_s);
  EXPECT_NEAR(r.epochs[1].train_energy_j, 100 / at_opt.throughput_ips * at_opt.power_w,
              1e-3 * r.epochs[1].train_energy_j);

  // Every limit is back at the maximum, and the journal is gone.
  auto gpus = device::open_gpu_set(r.device, {.sim_clock = device::SimClock::kVirtual});
  ASSERT_EQ(gpus->count(), 2);
  EXPECT_EQ(gpus->power_limit_mw(0), expected.range.max_mw);
  EXPECT_EQ(gpus->power_limit_mw(1), expected.range.max_mw);

  // A second run with the same global batch size loads the profile instead of profiling.
  const std::string saved_profile = read_file(log / "bs8.power.json");
  Job again = run_job(sim_env(log), {"--max-epochs", "5", "--metrics", "0.9"});
  ASSERT_EQ(again.result.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("profiling skipped"));
  const contract::TrainResult r2 = contract::load_train_result(log / result_name);
  EXPECT_FALSE(r2.profiled);
  EXPECT_TRUE(r2.windows.empty());
  EXPECT_EQ(r2.num_epochs, 1);
  ASSERT_EQ(r2.epochs.size(), 1u);
  EXPECT_EQ(r2.epochs[0].power_limit_mw, expected.optimal_mw);
  EXPECT_EQ(read_file(log / "bs8.power.json"), saved_profile);
}

// `zeus report` on the log dir of a profiled 2-rank run: the page, Markdown and JSON.
TEST(ZeusReport, RendersARunsLogDir) {
  test::TempDir dir;
  const fs::path log = dir / "log";
  Job job = run_job(sim_env(log), {"--max-epochs", "3", "--metrics", "0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  const Expected expected = expected_from_trace(0.5);

  auto r = test::run_process({ZEUS_CLI_PATH, "report", log.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("zeus+bs8.train.json: 2 epoch(s), target reached"));
  const std::string html = read_file(log / "report.html");
  EXPECT_THAT(html, HasSubstr("<svg"));
  EXPECT_THAT(html, HasSubstr("Power per GPU, global batch size 8"));
  EXPECT_THAT(html, HasSubstr(fmt::format("chosen: {} W", expected.optimal_mw / 1000)));
  EXPECT_EQ(count(html, "fill=\"#fdd49e\""), static_cast<int>(expected.candidates.size()))
      << "one shaded profiling window per limit";
  EXPECT_EQ(count(html, "<polyline"), 2 + 3) << "a line per GPU, and cost/energy/time per limit";
  // Self-contained: no scripts, styles or images from elsewhere.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));

  r = test::run_process({ZEUS_CLI_PATH, "report", log.string(), "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["num_epochs"].get<int>(), 2);
  EXPECT_EQ(j["power_logs"].size(), 4u);
  EXPECT_GT(j["power_logs"][0]["samples"].get<int>(), 0);

  r = test::run_process({ZEUS_CLI_PATH, "report", log.string(), "--format", "md"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| epoch | train s |"));
  EXPECT_THAT(r.out, HasSubstr(fmt::format("| {} (chosen) |", expected.optimal_mw / 1000)));

  r = test::run_process({ZEUS_CLI_PATH, "report", (dir / "nothing").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not a directory"));
  fs::create_directories(dir / "empty");
  r = test::run_process({ZEUS_CLI_PATH, "report", (dir / "empty").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("holds no train results"));
}

TEST(DataLoaderEndToEnd, CostThresholdStopsEveryRankAtTheSameEpoch) {
  test::TempDir dir;
  auto env = sim_env(dir / "log");
  env["ZEUS_COST_THRESH"] = "50";  // J: passed during the first epoch (profiling)
  env["ZEUS_JOB_ID"] = "early";
  Job job = run_job(env, {"--max-epochs", "5", "--metrics", "0.1"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;  // a clean stop, no rank killed
  EXPECT_EQ(count(job.output, "epochs=1 samples=400 stop=cost_threshold"), 2) << job.output;
  const contract::TrainResult r = contract::load_train_result(dir / "log" / "early+bs8.train.json");
  EXPECT_FALSE(r.reached);
  EXPECT_EQ(r.stop_reason, contract::StopReason::kCostThreshold);
  EXPECT_EQ(r.num_epochs, 1);
  EXPECT_GT(r.cost, 0);
  EXPECT_FALSE(fs::exists(dir / "log" / "power-limits.journal"));
}

TEST(DataLoaderEndToEnd, ObserverModeStaysAtTheMaximumAndReportsTheSaving) {
  test::TempDir dir;
  auto env = sim_env(dir / "log");
  env["ZEUS_USE_OPTIMAL_PL"] = "false";
  const Expected expected = expected_from_trace(0.5);
  Job job = run_job(env, {"--max-epochs", "3", "--metrics", "0.1,0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  const contract::TrainResult r = contract::load_train_result(dir / "log" / "zeus+bs8.train.json");
  EXPECT_TRUE(r.observer_mode);
  ASSERT_TRUE(r.optimal_power_limit_mw);
  EXPECT_EQ(*r.optimal_power_limit_mw, expected.optimal_mw);
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_EQ(r.epochs[1].power_limit_mw, expected.range.max_mw);
  EXPECT_EQ(r.epochs[2].power_limit_mw, expected.range.max_mw);
  // The saving it would have had: the 200 steps after profiling at the optimum instead of max.
  ASSERT_NE(expected.optimal_mw, expected.range.max_mw) << "the trace should favour a lower limit";
  const auto& mx = expected.measurements.front();
  const auto& op =
      *std::find_if(expected.measurements.begin(), expected.measurements.end(),
                    [&](const auto& m) { return m.power_limit_mw == expected.optimal_mw; });
  const double steps = 100 - 7 * static_cast<double>(expected.candidates.size()) + 200;
  const double want = steps * (mx.power_w / mx.throughput_ips - op.power_w / op.throughput_ips);
  EXPECT_GT(r.estimated_energy_saving_j, 0);
  EXPECT_NEAR(r.estimated_energy_saving_j, want, 1e-3 * want);
  EXPECT_THAT(job.output, HasSubstr("observer mode: would have saved"));
}

TEST(DataLoaderEndToEnd, MultiNodeOnlyLocalMastersTouchTheirGpus) {
  test::TempDir dir;
  std::vector<test::FakeGpu> node0 = test::four_a40s();
  node0.resize(2);
  std::vector<test::FakeGpu> node1 = test::four_a40s();
  node1.erase(node1.begin(), node1.begin() + 2);
  test::FakeNvml nvml0(node0);
  const fs::path state1 = dir / "node1-nvml.json";
  {
    nlohmann::json s = nvml0.state();
    for (size_t i = 0; i < 2; ++i)
      s["gpus"][i]["uuid"] = node1[i].uuid;
    std::ofstream(state1) << s.dump();
  }
  auto env = sim_env(dir / "log");
  env["ZEUS_DEVICE"] = "nvml";
  const std::string port = std::to_string(test::free_port());
  std::vector<std::unique_ptr<test::Child>> launchers;
  for (int node = 0; node < 2; ++node) {
    env["FAKE_NVML_STATE"] = node == 0 ? nvml0.state_path().string() : state1.string();
    std::string cmd = std::string(ZEUS_CLI_PATH) + " run --nnodes 2 --nproc-per-node 2" +
                      " --node-rank " + std::to_string(node) +
                      " --master-addr 127.0.0.1 --master-port " + port;
    for (const auto& a : kWorker)
      cmd += " " + a;
    cmd += " --max-epochs 2 --metrics 0.1,0.9";
    launchers.push_back(std::make_unique<test::Child>(
        std::vector<std::string>{"/bin/sh", "-c", cmd + " 2>&1"}, env));
  }
  std::string output;
  for (auto& l : launchers) {
    const test::ProcessResult r = l->wait();
    EXPECT_EQ(r.exit_code, 0) << r.out;
    output += r.out;
  }
  // pid of local rank 0 on each node: ranks 0 and 2.
  auto pid_of = [&](int rank) {
    const std::string key = "rank=" + std::to_string(rank) + " local_rank=0 pid=";
    const size_t at = output.find(key);
    EXPECT_NE(at, std::string::npos) << output;
    return at == std::string::npos ? -1 : std::stoi(output.substr(at + key.size()));
  };
  const std::array<nlohmann::json, 2> states{read_json(nvml0.state_path()), read_json(state1)};
  const std::array<int, 2> masters{pid_of(0), pid_of(2)};
  const size_t candidates = optimize::candidate_limits_mw({100'000, 300'000}, 25'000).size();
  for (int node = 0; node < 2; ++node) {
    const auto& history = states[static_cast<size_t>(node)]["limit_history"];
    // Each candidate on each GPU, then the optimum and the restore.
    EXPECT_GE(history.size(), 2 * (candidates + 1)) << history.dump();
    for (const auto& h : history)
      EXPECT_EQ(h["pid"].get<int>(), masters[static_cast<size_t>(node)]) << "node " << node;
    for (const auto& g : states[static_cast<size_t>(node)]["gpus"])
      EXPECT_EQ(g["limit_mw"].get<int64_t>(), 300'000);
  }
  // The result covers 4 GPUs on 2 nodes, and each node logged its own GPUs.
  const contract::TrainResult r = contract::load_train_result(dir / "log" / "zeus+bs16.train.json");
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.windows.size(), candidates);
  for (int g = 0; g < 4; ++g)
    EXPECT_TRUE(fs::exists(dir / "log" / ("bs16+e0+gpu" + std::to_string(g) + ".power.log"))) << g;
  EXPECT_FALSE(fs::exists(dir / "log" / "power-limits.journal"));
  EXPECT_FALSE(fs::exists(dir / "log" / "power-limits.node1.journal"));
}

// The node's local master owns exactly the physical GPUs its ranks use, found by UUID through
// CUDA_VISIBLE_DEVICES as CUDA reads it (these CPU ranks have no CUDA runtime to ask): permuted
// indices shared by both ranks, one UUID per worker (`zeus run --devices`), and a MIG instance
// standing for its GPU. The other GPUs' limits are never touched.
TEST(DataLoaderEndToEnd, OwnsExactlyThePhysicalGpusItsRanksUse) {
  struct Case {
    std::string visible;                // CUDA_VISIBLE_DEVICES for both ranks
    std::vector<std::string> launcher;  // extra zeus run flags
    std::set<int> owned;                // NVML indices
  };
  std::vector<test::FakeGpu> spec = test::four_a40s();
  spec[1].mig_uuids = {"MIG-11111111-2222-3333-4444-555555555555"};
  const std::vector<Case> cases{
      {"3,1", {}, {1, 3}},
      {"", {"--devices", spec[2].uuid + "," + spec[0].uuid}, {0, 2}},
      {"MIG-11111111-2222-3333-4444-555555555555,3", {}, {1, 3}},
  };
  for (const Case& c : cases) {
    test::TempDir dir;
    test::FakeNvml nvml(spec);
    auto env = sim_env(dir / "log");
    env["ZEUS_DEVICE"] = "nvml";
    if (!c.visible.empty()) {
      env["CUDA_VISIBLE_DEVICES"] = c.visible;
    }
    std::vector<std::string> launcher{"--nproc-per-node", "2", "--standalone"};
    launcher.insert(launcher.end(), c.launcher.begin(), c.launcher.end());
    Job job = run_job(env, {"--max-epochs", "2", "--metrics", "0.1,0.9"}, launcher);
    ASSERT_EQ(job.result.exit_code, 0) << c.visible << job.output;
    std::set<int> touched;
    for (const auto& [gpu, mw] : nvml.limit_history()) {
      touched.insert(gpu);
    }
    EXPECT_EQ(touched, c.owned) << c.visible << "\n" << job.output;
    for (int g : c.owned) {
      EXPECT_THAT(job.output, HasSubstr(fmt::format("({}, NVIDIA A40, machine index {})",
                                                    spec[static_cast<size_t>(g)].uuid, g)))
          << "the local master names what it owns";
    }
    for (int g = 0; g < 4; ++g) {
      EXPECT_EQ(nvml.limit_mw(g), 300'000) << "GPU " << g << " restored or untouched";
    }
    EXPECT_TRUE(fs::exists(dir / "log" / "bs8+e0+gpu1.power.log"));
    EXPECT_FALSE(fs::exists(dir / "log" / "bs8+e0+gpu2.power.log")) << "two GPUs, not four";
  }
}

// Measure-only mode on GPUs whose limits this process may not change (the fake refuses every
// set): no setter is called, every epoch's energy and time are measured at the limit the GPUs
// have, the result and power logs are written, no profile and no journal. Without the mode the
// refusal names it as a remedy.
TEST(DataLoaderEndToEnd, MeasureOnlySetsNoLimitAndMeasuresEveryEpoch) {
  test::TempDir dir;
  const fs::path log = dir / "log";
  std::vector<test::FakeGpu> spec = test::four_a40s();
  spec.resize(2);
  for (auto& g : spec) {
    g.limit_mw = 250'000;
    g.power_mw = 150'000;
  }
  test::FakeNvml nvml(spec);
  nvml.set_fault("set_no_permission", true);
  auto env = sim_env(log);
  env["ZEUS_DEVICE"] = "nvml";
  env["ZEUS_MEASURE_ONLY"] = "true";
  Job job = run_job(env, {"--max-epochs", "3", "--metrics", "0.1,0.9"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  EXPECT_THAT(job.output, HasSubstr("measure-only: no limit set, the GPUs ran at 250 W"));
  EXPECT_TRUE(nvml.limit_history().empty());
  const contract::TrainResult r = contract::load_train_result(log / "zeus+bs8.train.json");
  EXPECT_TRUE(r.measure_only);
  EXPECT_TRUE(r.reached);
  EXPECT_FALSE(r.profiled);
  EXPECT_FALSE(r.optimal_power_limit_mw);
  EXPECT_TRUE(r.windows.empty());
  ASSERT_EQ(r.epochs.size(), 2u);
  for (const auto& e : r.epochs) {
    EXPECT_EQ(e.power_limit_mw, 250'000);
    ASSERT_GT(e.train_time_s, 0);
    // The fake's counters grow at 150 W per GPU: the window's energy is 2 x 150 W x its time.
    // The window is ~0.1 s and its clock and counters are read at slightly different moments
    // (a loaded CI machine has shown 10 ms), so allow 20 ms of skew at 300 W on top of 10%:
    // one GPU's energy alone (half) still fails.
    const double expected_j = 300.0 * e.train_time_s;
    EXPECT_NEAR(e.train_energy_j, expected_j, 0.1 * expected_j + 300.0 * 0.020)
        << e.train_energy_j << " J in " << e.train_time_s << " s";
    EXPECT_GT(e.eval_energy_j, 0);
  }
  EXPECT_TRUE(fs::exists(log / "bs8+e1+gpu1.power.log"));
  EXPECT_FALSE(fs::exists(log / "bs8.power.json"));
  EXPECT_FALSE(fs::exists(log / "power-limits.journal"));
  // zeus report says so too.
  const auto md = test::run_process({ZEUS_CLI_PATH, "report", log.string(), "--format", "md"});
  EXPECT_THAT(md.out, HasSubstr("measure-only: no limit set")) << md.out << md.err;
  ASSERT_EQ(test::run_process({ZEUS_CLI_PATH, "report", log.string()}).exit_code, 0);
  EXPECT_THAT(read_file(log / "report.html"), HasSubstr("measure-only: no power limit was set"));

  env["ZEUS_MEASURE_ONLY"] = "";
  Job refused = run_job(env, {"--max-epochs", "2"});
  EXPECT_NE(refused.result.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("ZEUS_MEASURE_ONLY=true")) << refused.output;
  EXPECT_TRUE(nvml.limit_history().empty());
}

// A rank failing in the middle of profiling, with its GPUs at a lowered limit: by an exception
// (the loader's guard restores on the way out) and by SIGKILL (zeus run restores from the
// node's journal). Either way both simulated GPUs end at the maximum and no journal is left.
TEST(DataLoaderEndToEnd, LimitsAreRestoredWhenARankThrowsOrIsKilled) {
  const Expected expected = expected_from_trace(0.5);
  // Step 20 of epoch 0 is the third limit's window (7 steps per limit): below the maximum.
  for (const std::string how : {"--throw-at-step", "--kill-at-step"}) {
    test::TempDir dir;
    const fs::path log = dir / "log";
    Job job = run_job(sim_env(log), {"--max-epochs", "3", how, "20"});
    EXPECT_NE(job.result.exit_code, 0) << how << ": " << job.output;
    EXPECT_THAT(job.output, HasSubstr(how == "--throw-at-step" ? "the training step failed"
                                                               : "restored the power limits"))
        << job.output;
    std::string state;
    for (const auto& e : fs::directory_iterator(log))
      if (e.path().filename().string().starts_with(".sim-"))
        state = e.path().string();
    ASSERT_FALSE(state.empty()) << how;
    test::ScopedEnv gpus("ZEUS_SIM_GPUS", "2");
    auto sim = device::open_gpu_set("sim:v100@" + state, {.sim_clock = device::SimClock::kVirtual});
    EXPECT_EQ(sim->power_limit_mw(0), expected.range.max_mw) << how;
    EXPECT_EQ(sim->power_limit_mw(1), expected.range.max_mw) << how;
    EXPECT_FALSE(fs::exists(log / "power-limits.journal")) << how;
    EXPECT_FALSE(fs::exists(log / "zeus+bs8.train.json")) << how << ": no result for a failed job";
  }
}

// The journal handshake: a program that sets its log dir in code (not ZEUS_LOG_DIR) and is
// SIGKILLed mid-profiling still has its limits restored by zeus run, which told it where its
// journals go (ZEUS_JOURNAL_DIR) and settles exactly there.
TEST(DataLoaderEndToEnd, ProgressBarOnTheGlobalMasterOnly) {
  test::TempDir dir;
  Job job = run_job(sim_env(dir / "log"), {"--max-epochs", "2", "--metrics", "0.9", "--progress"});
  ASSERT_EQ(job.result.exit_code, 0) << job.output;
  // The finished bar of epoch 1's train and eval loops, with the phase after profiling.
  EXPECT_THAT(job.output, HasSubstr("epoch 1/2 train [########################] 100/100"));
  EXPECT_THAT(job.output, HasSubstr("epoch 1/2 eval  [########################] 25/25"));
  EXPECT_THAT(job.output, HasSubstr("samples/s"));
  EXPECT_THAT(job.output, HasSubstr(" W  optimal "));
  EXPECT_EQ(count(job.output, "100/100"), 1) << "drawn by rank 0 only:\n" << job.output;
}

TEST(DataLoaderEndToEnd, SingleProcessWithLoaderThreads) {
  test::TempDir dir;
  auto env = sim_env(dir / "log");
  std::string cmd = std::string(ZEUS_LOADER_WORKER_PATH) +
                    " --single --samples 800 --batch-size 8 --workers 3 --max-epochs 2";
  test::Child child({"/bin/sh", "-c", cmd + " 2>&1"}, env);
  const test::ProcessResult r = child.wait();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("epochs=2 samples=1600 stop=max_epochs"));
  const contract::TrainResult result =
      contract::load_train_result(dir / "log" / "zeus+bs8.train.json");
  EXPECT_FALSE(result.reached);
  EXPECT_EQ(result.world_size, 1);
}

TEST(DataLoaderEndToEnd, BadInputFailsBeforeTrainingAndOverwritesNothing) {
  test::TempDir dir;
  const fs::path log = dir / "log";
  fs::create_directories(log);
  const std::string old_result = "{\"energy\": 1, \"time\": 2, \"cost\": 3, \"reached\": true}";
  write_file_atomic(log / "zeus+bs8.train.json", old_result);

  auto env = sim_env(log);
  env["ZEUS_TARGET_METRIC"] = "";
  Job no_target = run_job(env, {});
  EXPECT_EQ(no_target.result.exit_code, 2) << no_target.output;
  EXPECT_THAT(no_target.output, HasSubstr("target metric is missing"));

  Job no_eval = run_job(sim_env(log), {"--no-eval"});
  EXPECT_EQ(no_eval.result.exit_code, 2) << no_eval.output;
  EXPECT_THAT(no_eval.output, HasSubstr("eval loader is missing"));

  Job bad_sampler = run_job(sim_env(log), {"--bad-sampler"});
  EXPECT_EQ(bad_sampler.result.exit_code, 2) << bad_sampler.output;
  EXPECT_THAT(bad_sampler.output,
              HasSubstr("the sampler is for rank 0 of 3, but this process is rank 0 of 2"));

  auto bad_eta = sim_env(log);
  bad_eta["ZEUS_ETA_KNOB"] = "1.5";
  Job eta = run_job(bad_eta, {});
  EXPECT_EQ(eta.result.exit_code, 2) << eta.output;
  EXPECT_THAT(eta.output, HasSubstr("ZEUS_ETA_KNOB"));

  write_file_atomic(log / "bs8.power.json", "{\"train_power\": [");
  Job corrupt = run_job(sim_env(log), {});
  EXPECT_EQ(corrupt.result.exit_code, 2) << corrupt.output;
  EXPECT_THAT(corrupt.output, HasSubstr((log / "bs8.power.json").string()));
  EXPECT_THAT(corrupt.output, Not(HasSubstr("epoch 1:")));
  EXPECT_EQ(read_file(log / "bs8.power.json"), "{\"train_power\": [");

  EXPECT_EQ(read_file(log / "zeus+bs8.train.json"), old_result);
  EXPECT_FALSE(fs::exists(log / "power-limits.journal"));
}

}  // namespace
}  // namespace zeus
