// zeus bso-server's service and stores in process: upstream's routes, statuses and bodies, the
// decisions across a whole job, trial numbers under concurrent recurrences, the Dispatched-trial
// timeout, a database made by upstream's server, migrations, and database URLs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "bso_support.h"
#include "zeus/bso/service.h"
#include "zeus/bso/store.h"

namespace zeus::bso {
namespace {

using nlohmann::json;
using optimize::bso::Stage;
using optimize::bso::TrialStatus;
using optimize::bso::TrialType;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A Service over a database (a fresh SQLite file unless a URL is given), called as HTTP would.
struct Bso {
  explicit Bso(std::string url = "", ServiceOptions options = {}) {
    if (url.empty()) {
      url = "sqlite:///" + (dir / "bso.db").string();
    }
    store = open_store(url);
    service = std::make_unique<Service>(*store, std::move(options));
  }
  http::Response call(const std::string& method, const std::string& target,
                      const std::string& body = "") const {
    http::Request r;
    r.method = method;
    const auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) {
      for (const std::string& kv : split(target.substr(q + 1), '&')) {
        const auto eq = kv.find('=');
        r.query.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
      }
    }
    r.body = body;
    return service->handle(r);
  }
  std::optional<Job> job(const std::string& id) const { return store->begin()->lock_job(id); }
  json next(const std::string& id) const {
    const auto r = call("GET", "/jobs/batch_size?job_id=" + id);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  json report(const json& trial, double time_s, double energy_j, double metric, int epoch) const {
    json body = trial;
    body["time"] = time_s;
    body["energy"] = energy_j;
    body["metric"] = metric;
    body["current_epoch"] = epoch;
    const auto r = call("POST", "/report", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }

  static std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string part; std::getline(in, part, sep);) {
      out.push_back(part);
    }
    return out;
  }

  test::TempDir dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<Service> service;
};

TEST(BsoService, RegistrationAnswersAsUpstream) {
  Bso bso;
  const std::string spec = test::job_spec("img-1", {64, 16, 32}, 32);
  auto r = bso.call("POST", "/jobs", spec);
  ASSERT_EQ(r.status, 201) << r.body;
  const json created = json::parse(r.body);
  EXPECT_EQ(created["job_id"], "img-1");
  EXPECT_EQ(created["batch_sizes"], json({16, 32, 64})) << "sorted, as pydantic's validator";
  EXPECT_EQ(created["eta_knob"], 0.5);
  EXPECT_EQ(created["beta_knob"], 2.0);
  EXPECT_EQ(created["max_epochs"], 100);
  EXPECT_EQ(bso.call("POST", "/jobs", spec).status, 200) << "the same job again";
  r = bso.call("POST", "/jobs", test::job_spec("img-1", {16, 32}, 32));
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(json::parse(r.body)["message"],
            "JobSpec doesn't match with existing jobSpec. Use a new job_id for different "
            "configuration");
  EXPECT_EQ(bso.job("img-1")->params.batch_sizes, (std::vector<int64_t>{16, 32, 64}))
      << "the mismatch stored nothing";

  // Without a job_id, one is made from the prefix.
  r = bso.call("POST", "/jobs", test::job_spec("", {16, 32}, 16));
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id = json::parse(r.body)["job_id"];
  EXPECT_THAT(id, ::testing::MatchesRegex("job-[0-9a-f]{8}"));
  EXPECT_TRUE(bso.job(id));
}

TEST(BsoService, BadInputGetsTheDocumentedStatusAndStoresNothing) {
  Bso bso;
  struct Case {
    std::string body;
    std::string field;
  };
  const std::vector<Case> cases{
      {test::job_spec("a-1", {16, 32}, 64), "default_batch_size"},
      {test::job_spec("a-1", {}, 16), "batch_sizes"},
      {test::job_spec("a-1", {16, 32}, 16, R"("eta_knob":1.5)"), "eta_knob"},
      {test::job_spec("a-1", {16, 32}, 16, R"("beta_knob":0)"), "beta_knob"},
      {test::job_spec("a-1", {16, 32}, 16, R"("max_epochs":0)"), "max_epochs"},
      {test::job_spec("a-1", {16, 32}, 16, R"("max_epochs":"many")"), "max_epochs"},
      {R"({"job_id":"b-1","job_id_prefix":"a","batch_sizes":[8],"default_batch_size":8,)"
       R"("max_power":300,"number_of_gpus":1,"gpu_model":"A40"})",
       "job_id"},
      {R"({"job_id":"a-1","job_id_prefix":"a","batch_sizes":[8],"default_batch_size":8})",
       "max_power"},
      {R"({"job_id": "a-1", )", "body"},
      {"[1, 2]", "body"},
  };
  for (const Case& c : cases) {
    const auto r = bso.call("POST", "/jobs", c.body);
    EXPECT_EQ(r.status, 422) << c.body << " -> " << r.body;
    const json detail = json::parse(r.body)["detail"];
    ASSERT_TRUE(detail.is_array()) << r.body;
    EXPECT_EQ(detail[0]["loc"].back(), c.field) << r.body;
  }
  EXPECT_FALSE(bso.job("a-1"));
  EXPECT_FALSE(bso.job("b-1"));

  // Unknown jobs and trials: upstream's 400s and 404s with {"message"}.
  auto r = bso.call("GET", "/jobs/batch_size?job_id=nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["message"], "Unknown job(nope). Please register the job first");
  EXPECT_EQ(bso.call("GET", "/jobs/batch_size").status, 422) << "job_id is required";
  const std::string result =
      R"({"job_id":"%","batch_size":16,"trial_number":1,"time":1,"energy":1,"metric":1,)"
      R"("current_epoch":1})";
  EXPECT_EQ(bso.call("POST", "/report", result).status, 400);
  ASSERT_EQ(bso.call("POST", "/jobs", test::job_spec("a-1", {16, 32}, 16)).status, 201);
  r = bso.call("POST", "/report",
               R"({"job_id":"a-1","batch_size":16,"trial_number":7,"time":1,"energy":1,)"
               R"("metric":1,"current_epoch":1})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(bso.call("POST", "/report", R"({"job_id":"a-1"})").status, 422);
  r = bso.call("PATCH", "/trials", R"({"job_id":"a-1","batch_size":16,"trial_number":7})");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(json::parse(r.body)["message"].get<std::string>(),
              HasSubstr("Could not find the trial"));
  r = bso.call("DELETE", "/jobs?job_id=zzz");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["message"], "No job was deleted.");
  EXPECT_EQ(bso.call("GET", "/nothing").status, 404);
  EXPECT_EQ(bso.call("PUT", "/report").status, 405);
  EXPECT_TRUE(bso.job("a-1")->trials.empty()) << "no bad request made a trial";
}

// A whole job through the routes: Zeus's pruning (the default, down, then up; a second round
// from the cheapest over the converged sizes), an early stop at beta x min_cost, then the MAB.
TEST(BsoService, PruningThenTheBanditDecideAsUpstream) {
  Bso bso;
  ASSERT_EQ(bso.call("POST", "/jobs", test::job_spec("w-1", {16, 32, 64, 128}, 32)).status, 201);
  // Cost = 0.5 E + 0.5 x 300 W x 1 s: 16 -> 350, 32 -> 300, 64 -> 250, 128 -> 650 (> 2 x 250).
  const std::map<int, double> energy{{16, 400}, {32, 300}, {64, 200}, {128, 1000}};
  std::vector<int> sizes;
  std::vector<bool> converged;
  for (int i = 0; i < 7; ++i) {
    const json trial = bso.next("w-1");
    EXPECT_EQ(trial["trial_number"], i + 1);
    const int bs = trial["batch_size"];
    sizes.push_back(bs);
    const json reply = bso.report(trial, 1.0, energy.at(bs), 0.9, 1);
    EXPECT_TRUE(reply["stop_train"]);
    converged.push_back(reply["converged"]);
  }
  EXPECT_EQ(sizes, (std::vector<int>{32, 16, 64, 128, 64, 32, 16}));
  EXPECT_EQ(converged, (std::vector<bool>{true, true, true, false, true, true, true}));
  const json mab = bso.next("w-1");
  const Job job = *bso.job("w-1");
  EXPECT_EQ(job.stage, Stage::kMab);
  EXPECT_EQ(job.arms.size(), 3u) << "the sizes that converged in the last round";
  EXPECT_FALSE(job.arms.contains(128));
  EXPECT_EQ(job.trials.back().type, TrialType::kMab);
  EXPECT_EQ(job.min_cost, 250.0);
  EXPECT_EQ(job.min_cost_batch_size, 64);
  EXPECT_TRUE(job.arms.contains(mab["batch_size"].get<int64_t>()));

  // A report that keeps training, then the trial's end: its arm learns from it.
  const int bs = mab["batch_size"];
  EXPECT_FALSE(bso.report(mab, 0.5, energy.at(bs) / 2, 0.1, 1)["stop_train"]);
  EXPECT_EQ(bso.report(mab, 1.0, energy.at(bs), 0.9, 2)["message"], "Train succeeded");
  EXPECT_EQ(bso.report(mab, 1.0, energy.at(bs), 0.9, 3)["message"],
            "Result for this trial(8) is already reported.");
  EXPECT_EQ(bso.job("w-1")->arms.at(bs).num_observations, 1);

  // DELETE takes the job and everything of it.
  EXPECT_EQ(bso.call("DELETE", "/jobs?job_id=w-1").status, 200);
  EXPECT_FALSE(bso.job("w-1"));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((bso.dir / "bso.db").c_str(), &db), SQLITE_OK);
  for (const char* table : {"Trial", "BatchSize", "GaussianTsArmState"}) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, fmt::format(R"(SELECT COUNT(*) FROM "{}")", table).c_str(), -1, &s,
                       nullptr);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(s, 0), 0) << table;
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
}

// Recurrences of one job and other jobs, all at once: every trial number is handed out once,
// 1..N per job with no gap.
void expect_unique_trial_numbers(const std::function<json(const std::string&)>& next,
                                 const std::function<std::optional<Job>(const std::string&)>& job,
                                 int threads, int per_thread) {
  std::mutex mutex;
  std::map<std::string, std::set<int64_t>> seen;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::string id = t % 2 == 0 ? "hot-1" : fmt::format("cold-{}", t);
      for (int i = 0; i < per_thread; ++i) {
        const json trial = next(id);
        std::lock_guard lock(mutex);
        EXPECT_TRUE(seen[id].insert(trial["trial_number"].get<int64_t>()).second)
            << id << " trial " << trial["trial_number"] << " handed out twice";
      }
    });
  }
  for (auto& t : pool) {
    t.join();
  }
  for (const auto& [id, numbers] : seen) {
    const Job j = *job(id);
    ASSERT_EQ(j.trials.size(), numbers.size()) << id;
    for (size_t i = 0; i < j.trials.size(); ++i) {
      EXPECT_EQ(j.trials[i].trial_number, static_cast<int64_t>(i + 1)) << id;
    }
  }
}

TEST(BsoService, ConcurrentRecurrencesGetUniqueTrialNumbers) {
  Bso bso;
  for (const char* id : {"hot-1", "cold-1", "cold-3", "cold-5", "cold-7"}) {
    ASSERT_EQ(bso.call("POST", "/jobs", test::job_spec(id, {16, 32, 64}, 32)).status, 201);
  }
  expect_unique_trial_numbers([&](const std::string& id) { return bso.next(id); },
                              [&](const std::string& id) { return bso.job(id); }, 8, 25);
}

TEST(BsoService, ATrialWithoutAResultTimesOutAndItsBatchSizeIsTriedAgain) {
  auto now = std::chrono::system_clock::now();
  ServiceOptions options;
  options.dispatched_timeout = std::chrono::hours(1);
  options.now = [&now] { return now; };
  Bso bso("", options);
  ASSERT_EQ(bso.call("POST", "/jobs", test::job_spec("t-1", {16, 32}, 32)).status, 201);
  const json first = bso.next("t-1");
  now += std::chrono::minutes(30);
  const json second = bso.next("t-1");
  EXPECT_EQ(bso.job("t-1")->trials[1].type, TrialType::kConcurrent)
      << "within the timeout the exploration is still out";
  now += std::chrono::minutes(45);  // the first is 75 min old, the second 45
  const json third = bso.next("t-1");
  const Job job = *bso.job("t-1");
  EXPECT_EQ(job.trials[0].status, TrialStatus::kFailed);
  EXPECT_EQ(job.trials[1].status, TrialStatus::kDispatched);
  EXPECT_EQ(third["batch_size"], 32);
  EXPECT_EQ(job.trials[2].type, TrialType::kExploration) << "the default is explored again";
  // The client that was given up on reports after all: told to stop, not counted.
  const json late = bso.report(first, 1, 300, 0.9, 1);
  EXPECT_TRUE(late["stop_train"]);
  EXPECT_FALSE(late["converged"]);
  EXPECT_FALSE(bso.job("t-1")->min_cost);
}

// zeus-cpp's lean policy, per job: asked for in the registration ("policy", "lean"), or the
// server's default for clients that do not say (upstream's); kept with the job, part of its
// identity; a trial's epochs and lean's cap are stored beside upstream's columns.
TEST(BsoService, ThePolicyIsChosenPerJobAndKeptWithIt) {
  ServiceOptions options;
  options.default_policy = optimize::parse_policy_choice("lean", "cap=0");
  Bso bso("", options);
  auto r = bso.call("POST", "/jobs",
                    test::job_spec("l-1", {16, 32, 64}, 64, R"("policy":"lean","lean":"gamma=2")"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(json::parse(r.body)["policy"], "lean");
  EXPECT_THAT(json::parse(r.body)["lean"].get<std::string>(), HasSubstr("gamma=2,"));
  EXPECT_EQ(bso.call("POST", "/jobs", test::job_spec("l-1", {16, 32, 64}, 64)).status, 200)
      << "a client that names no policy (upstream's) keeps the job's";
  EXPECT_EQ(bso.call("POST", "/jobs", test::job_spec("l-1", {16, 32, 64}, 64, R"("policy":"zeus")"))
                .status,
            409);
  r = bso.call("POST", "/jobs",
               test::job_spec("l-2", {16, 32}, 16, R"("policy":"lean","lean":"gamma=-1")"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(json::parse(r.body)["detail"][0]["loc"].back(), "lean") << r.body;
  r = bso.call("POST", "/jobs", test::job_spec("d-1", {16, 32}, 16));
  EXPECT_EQ(json::parse(r.body)["lean"], "gamma=1.5,patience=1,retry=1.25,cap=0,spread=0.25")
      << "the server's default";

  const json trial = bso.next("l-1");
  bso.report(trial, 1, 100, 0.1, 1);
  bso.report(trial, 2, 200, 0.9, 2);
  const Bso reopened("sqlite:///" + (bso.dir / "bso.db").string());
  const Job job = *reopened.job("l-1");
  EXPECT_EQ(job.params.policy.policy, optimize::BsoPolicy::kLean);
  EXPECT_EQ(job.params.policy.lean.gamma, 2.0);
  EXPECT_EQ(job.trials[0].epochs, 2);
  EXPECT_EQ(reopened.job("d-1")->params.policy.lean.cap, 0.0);
}

TEST(BsoStore, ADatabaseMadeByUpstreamOpensAndItsJobContinues) {
  test::TempDir dir;
  const fs::path file = dir / "upstream.db";
  std::ifstream in(fs::path(ZEUS_TEST_DATA_DIR) / "bso" / "upstream_0.16_sqlite.sql");
  const std::string sql((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(sql.empty());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);

  Bso bso("sqlite:///" + file.string());
  const Job job = *bso.job("up-1");
  EXPECT_EQ(job.params.batch_sizes, (std::vector<int64_t>{16, 32, 64}));
  EXPECT_EQ(job.min_cost, 300.0);
  ASSERT_EQ(job.trials.size(), 2u);
  EXPECT_EQ(job.trials[0].converged, true);
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::microseconds>(job.trials[0].start.time_since_epoch())
              .count() %
          1'000'000,
      123456);
  // 32 converged, 16 is still out: a concurrent trial at the cheapest, number 3.
  const json next = bso.next("up-1");
  EXPECT_EQ(next["trial_number"], 3);
  EXPECT_EQ(next["batch_size"], 32);
  EXPECT_EQ(bso.report(json{{"job_id", "up-1"}, {"batch_size", 16}, {"trial_number", 2}}, 1, 400,
                       0.9, 1)["message"],
            "Train succeeded");
}

int64_t schema_rows(const fs::path& file) {
  sqlite3* db = nullptr;
  sqlite3_open(file.c_str(), &db);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM zeus_cpp_schema_version", -1, &s, nullptr);
  const int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return n;
}

TEST(BsoStore, ServersStartingAtOnceMigrateOnceAndANewerDatabaseIsRefused) {
  test::TempDir dir;
  const std::string url = "sqlite:///" + (dir / "m.db").string();
  std::vector<std::thread> starts;
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  for (int i = 0; i < 6; ++i) {
    starts.emplace_back([&] {
      try {
        open_store(url);
      } catch (const std::exception& e) {
        std::lock_guard lock(failures_mutex);
        failures.emplace_back(e.what());
      }
    });
  }
  for (auto& t : starts) {
    t.join();
  }
  EXPECT_THAT(failures, testing::IsEmpty());
  EXPECT_EQ(schema_rows(dir / "m.db"), kSchemaVersion);

  sqlite3* db = nullptr;
  sqlite3_open((dir / "m.db").c_str(), &db);
  sqlite3_exec(db, "INSERT INTO zeus_cpp_schema_version VALUES (99, 'later')", nullptr, nullptr,
               nullptr);
  sqlite3_close(db);
  try {
    open_store(url);
    ADD_FAILURE() << "a version-99 database opened";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("schema version 99"));
    EXPECT_THAT(e.what(), HasSubstr((dir / "m.db").string()));
  }
}

TEST(BsoStore, DatabaseUrlsAsUpstreamWritesThem) {
  test::TempDir dir;
  EXPECT_NO_THROW(open_store("sqlite+aiosqlite:///" + (dir / "a.db").string()));
  EXPECT_TRUE(fs::exists(dir / "a.db"));
  const auto message = [](const std::string& url) {
    try {
      open_store(url);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("opened");
  };
  EXPECT_THAT(message("mysql+asyncmy://u:p@localhost/zeus"), HasSubstr("MySQL"));
  EXPECT_THAT(message("mysql+asyncmy://u:p@localhost/zeus"), HasSubstr("postgresql://"));
  EXPECT_THAT(message("sqlite://"), HasSubstr("names no file"));
  EXPECT_THAT(message("zeus.db"), HasSubstr("no scheme"));
  EXPECT_THAT(message("redis://x"), HasSubstr("unknown scheme 'redis'"));
  try {
    open_store("sqlite:///" + (dir / "missing" / "dir" / "x.db").string());
    ADD_FAILURE() << "a database in a missing directory opened";
  } catch (const DatabaseError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir / "missing").string()));
  }
}

}  // namespace
}  // namespace zeus::bso
