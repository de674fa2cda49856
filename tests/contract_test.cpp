// The run contract (contract/): every file name a run writes, parsed back; the train result
// and power profile files; the power logs; what a log directory lists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "support/test_support.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/units.h"
#include "zeus/contract/run_files.h"
#include "zeus/contract/train_result.h"
#include "zeus/contract/worker_env.h"

namespace zeus::contract {
namespace {

using optimize::LimitMeasurement;
using ::testing::HasSubstr;

const std::vector<LimitMeasurement> kThreeLimits = {
    {300'000, 10, 280}, {250'000, 9.5, 220}, {200'000, 8, 170}};

TEST(RunFileNames, RoundTripAndRejectEverythingElse) {
  EXPECT_EQ(power_profile_name(128), "bs128.power.json");
  EXPECT_EQ(parse_power_profile_name("bs128.power.json"), 128);
  EXPECT_EQ(train_result_name("rec000+try1", 64), "rec000+try1+bs64.train.json");
  const auto r = parse_train_result_name("rec000+try1+bs64.train.json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->job_id, "rec000+try1");
  EXPECT_EQ(r->global_batch_size, 64);
  const auto tricky = parse_train_result_name("a+bs3+bs16.train.json");
  ASSERT_TRUE(tricky);
  EXPECT_EQ(tricky->job_id, "a+bs3") << "the batch size follows the last +bs";
  EXPECT_EQ(power_log_name({256, 3, 7}), "bs256+e3+gpu7.power.log");
  const auto l = parse_power_log_name("bs256+e3+gpu7.power.log");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->global_batch_size, 256);
  EXPECT_EQ(l->epoch, 3);
  EXPECT_EQ(l->gpu, 7);
  EXPECT_EQ(journal_name(0), "power-limits.journal");
  EXPECT_EQ(journal_name(3), "power-limits.node3.journal");
  EXPECT_EQ(parse_journal_name("power-limits.journal"), 0);
  EXPECT_EQ(parse_journal_name("power-limits.node3.journal"), 3);
  for (const char* not_ours :
       {"bs.power.json", "bs01.power.json", "bs-4.power.json", "bs12.power.json.tmp",
        ".bs12.power.json.tmp.x1y2z3", "+bs8.train.json", "job+bs.train.json",
        "job+bs8x.train.json", "bs8+e+gpu1.power.log", "bs8+gpu1+e2.power.log",
        "power-limits.node0.journal", "power-limits.nodex.journal", "report.html"}) {
    EXPECT_FALSE(parse_power_profile_name(not_ours)) << not_ours;
    EXPECT_FALSE(parse_train_result_name(not_ours)) << not_ours;
    EXPECT_FALSE(parse_power_log_name(not_ours)) << not_ours;
    EXPECT_FALSE(parse_journal_name(not_ours)) << not_ours;
  }
}

TEST(RunFileNames, AListingSortsALogDirectoryByKind) {
  test::TempDir dir;
  for (const char* name : {"zeus+bs64.train.json", "bs64.power.json", "bs64+e0+gpu1.power.log",
                           "bs64+e0+gpu0.power.log", "power-limits.node2.journal", "tune.json",
                           "tune-tries.jsonl", "report.html", ".bs64.power.json.tmp.abc"}) {
    std::ofstream(dir / name) << "x";
  }
  const RunDirListing l = list_run_dir(dir.path());
  ASSERT_EQ(l.train_results.size(), 1u);
  EXPECT_EQ(l.train_results[0].second.job_id, "zeus");
  ASSERT_EQ(l.power_profiles.size(), 1u);
  ASSERT_EQ(l.power_logs.size(), 2u);
  EXPECT_EQ(l.power_logs[0].second.gpu, 0) << "sorted by name";
  ASSERT_EQ(l.journals.size(), 1u);
  EXPECT_EQ(l.journals[0].second, 2);
  EXPECT_TRUE(l.tune_options && l.tune_tries);
  EXPECT_TRUE(list_run_dir(dir / "missing").train_results.empty());
}

// The Python optimizer's process journals: the name python/zeus_cpp writes, found in a
// directory among other files, and nothing else taken for one.
TEST(RunFileNames, ProcessJournalsAreNamedAndListed) {
  EXPECT_EQ(process_journal_name("node7", 4121), "gplo-node7-4121.journal");
  EXPECT_TRUE(is_process_journal_name("gplo-node7-4121.journal"));
  for (const char* other :
       {"gplo-.journal", "power-limits.journal", "gplo-a-1.journal.tmp", "xgplo-a-1.journal"}) {
    EXPECT_FALSE(is_process_journal_name(other)) << other;
  }
  test::TempDir dir;
  for (const char* name : {"gplo-b-2.journal", "gplo-a-1.journal", "power-limits.journal",
                           "gplo-c-3.journal.previous-boot"}) {
    std::ofstream(dir / name) << "x";
  }
  const auto found = list_process_journals(dir.path());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].filename(), "gplo-a-1.journal");
  EXPECT_EQ(found[1].filename(), "gplo-b-2.journal");
  EXPECT_TRUE(list_process_journals(dir / "missing").empty());
}

TEST(PowerLog, ReadsWhatPowerMonitorWritesAndNamesABadLine) {
  test::TempDir dir;
  const auto path = dir / power_log_name({8, 0, 0});
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  std::ofstream(path) << kPowerLogHeader << power_log_row(t, 150'500)
                      << power_log_row(t + std::chrono::milliseconds(100), 151'000);
  const auto samples = read_power_log(path);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].first, 1'700'000'000'000'000'000);
  EXPECT_DOUBLE_EQ(samples[0].second, 150.5);
  EXPECT_EQ(samples[1].first - samples[0].first, 100'000'000);
  std::ofstream(path, std::ios::app) << "yesterday,12\n";
  try {
    read_power_log(path);
    FAIL() << "a malformed row was read";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string() + ":4: expected 'UTC time,power in mW'"));
  }
}

TEST(PowerProfileFile, RoundTripsAndRejectsCorruptFiles) {
  test::TempDir dir;
  const auto path = contract::power_profile_path(dir.path(), 1024);
  EXPECT_EQ(path.filename(), "bs1024.power.json");
  EXPECT_EQ(contract::load_power_profile(path), std::nullopt);
  optimize::PowerProfile p;
  p.global_batch_size = 1024;
  p.job_id = "job";
  for (const auto& m : kThreeLimits) {
    p.train[m.power_limit_mw] = m;
  }
  p.optimal_power_limit_mw = 250'000;
  p.eval_throughput_ips = 20;
  p.eval_power_w = 150;
  contract::save_power_profile(path, p);
  const auto loaded = contract::load_power_profile(path);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->optimal_power_limit_mw, 250'000);
  EXPECT_EQ(loaded->train.size(), 3u);
  EXPECT_DOUBLE_EQ(loaded->train.at(200'000).power_w, 170);
  EXPECT_EQ(loaded->eval_power_w, 150);
  for (
      const char* bad :
      {"{", "[]",
       R"({"batch_size": 8, "train_power": {}, "train_throughput": {}, "optimal_pl": 1})",
       R"({"batch_size": 8, "train_power": {"100": 5}, "train_throughput": {"100": 1}, "optimal_pl": 200})",
       R"({"batch_size": 8, "train_power": {"x": 5}, "train_throughput": {"x": 1}, "optimal_pl": 1})"}) {
    std::ofstream(path) << bad;
    try {
      (void)contract::load_power_profile(path);
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path.string())) << bad;
    }
  }
}

TEST(TrainResult, RoundTripsAndReadsZeusFiles) {
  TrainResult r;
  r.energy_j = 1000.5;
  r.time_s = 20.25;
  r.cost = 1500;
  r.num_epochs = 3;
  r.reached = true;
  r.job_id = "j";
  r.global_batch_size = 256;
  r.world_size = 4;
  r.nodes = 2;
  r.stop_reason = StopReason::kTargetReached;
  r.optimal_power_limit_mw = 175'000;
  r.max_power_limit_mw = 250'000;
  r.cost_threshold = std::numeric_limits<double>::infinity();
  r.epochs.push_back({0, 100, 10, 9.5, 0.5, 800, 20, 0.7, 175'000});
  r.windows.push_back({0, 250'000, 1, 2});
  const TrainResult back = train_result_from_json(to_json(r), "test");
  EXPECT_EQ(back.energy_j, r.energy_j);
  EXPECT_EQ(back.num_epochs, 3);
  EXPECT_TRUE(back.reached);
  EXPECT_EQ(back.optimal_power_limit_mw, 175'000);
  EXPECT_TRUE(std::isinf(back.cost_threshold));
  ASSERT_EQ(back.epochs.size(), 1u);
  EXPECT_EQ(back.epochs[0].metric, 0.7);
  EXPECT_EQ(back.epochs[0].power_limit_mw, 175'000);
  ASSERT_EQ(back.windows.size(), 1u);
  EXPECT_EQ(back.windows[0].end_unix_ns, 2);

  // What Zeus itself writes.
  const TrainResult zeus = train_result_from_json(
      R"({"energy": 5.0, "time": 2.0, "cost": 7.0, "num_epochs": 1, "reached": false})", "z");
  EXPECT_EQ(zeus.cost, 7.0);
  EXPECT_FALSE(zeus.reached);
  EXPECT_THROW(train_result_from_json(R"({"energy": 5.0})", "z"), ConfigError);
  EXPECT_THROW(train_result_from_json("{", "z"), ConfigError);
  EXPECT_THAT(summary_line(r), HasSubstr("optimal limit 175 W (max 250 W)"));

  // A limit that is not a whole watt survives (whole ones stay integers, as Zeus writes them).
  r.optimal_power_limit_mw = 187'500;
  r.epochs[0].power_limit_mw = 187'500;
  const auto text = to_json(r);
  EXPECT_THAT(text, HasSubstr("\"optimal_pl\": 187.5"));
  EXPECT_THAT(text, HasSubstr("\"max_pl\": 250,"));
  const TrainResult half = train_result_from_json(text, "half");
  EXPECT_EQ(half.optimal_power_limit_mw, 187'500);
  EXPECT_EQ(half.epochs[0].power_limit_mw, 187'500);
  EXPECT_THAT(summary_line(half), HasSubstr("optimal limit 187.5 W (max 250 W)"));
  EXPECT_THROW(train_result_from_json(
                   R"({"energy": 5.0, "time": 2.0, "cost": 7.0, "num_epochs": 1, "reached": false,
                       "optimal_pl": "high"})",
                   "z"),
               ConfigError);
}

// One lookup over a map, as a launcher's child would see its environment.
EnvLookup lookup_in(const std::map<std::string, std::string>& env) {
  return [env](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    if (it == env.end() || it->second.empty()) {
      return std::nullopt;
    }
    return it->second;
  };
}

TEST(WorkerEnv, RoundTripsThroughTheEnvironment) {
  WorkerEnv w;
  w.rank = 5;
  w.local_rank = 1;
  w.world_size = 8;
  w.local_world_size = 4;
  w.group_rank = 1;
  w.group_world_size = 2;
  w.role_name = "trainer";
  w.master_addr = "node0";
  w.master_port = 29401;
  w.run_id = "job7";
  w.max_restarts = 3;
  w.restart_count = 2;
  w.use_agent_store = true;
  w.log_dir = "/tmp/logs";
  w.journal_dir = "/tmp/journals";
  const auto env = w.to_env();
  EXPECT_EQ(env.at("ROLE_RANK"), "5");
  EXPECT_EQ(env.at("ROLE_WORLD_SIZE"), "8");
  EXPECT_EQ(env.at("ZEUS_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  const auto back = worker_env_from(lookup_in(env));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_env(), env) << "every field survives the trip";
  EXPECT_FALSE(worker_env_from(lookup_in({{"RANK", "0"}, {"WORLD_SIZE", "1"}})))
      << "not a worker without LOCAL_RANK";
  try {
    (void)worker_env_from(lookup_in({{"RANK", "0"}, {"WORLD_SIZE", "two"}, {"LOCAL_RANK", "0"}}));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("WORLD_SIZE"));
  }
}

TEST(WorkerEnv, EveryVariableWrittenIsDeclared) {
  std::set<std::string> declared;
  for (const EnvVar& v : all_env_vars()) {
    declared.insert(std::string(v.name));
  }
  WorkerEnv w;
  w.log_dir = "l";
  w.journal_dir = "j";
  JobEnv job{.log_dir = "l", .job_id = "x", .eta = 0.5, .cost_threshold = 1.0, .max_epochs = 3};
  for (const auto& env : {w.to_env(), job.to_env()}) {
    for (const auto& [name, value] : env) {
      EXPECT_TRUE(declared.count(name)) << name << " is written but not declared in common/env.h";
    }
  }
  EXPECT_EQ(JobEnv{.cost_threshold = std::numeric_limits<double>::infinity()}.to_env().at(
                "ZEUS_COST_THRESH"),
            "inf");
}

}  // namespace
}  // namespace zeus::contract
