// `zeus bso-server` as a process: killed with SIGKILL mid-request and started again, bad flags,
// and PostgreSQL 15 (a real server started for the test) shared by two servers at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bso_support.h"
#include "zeus/bso/service.h"
#include "zeus/bso/store.h"

namespace zeus::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json next_trial(const std::string& server, const std::string& job_id) {
  const HttpReply r = http_call("GET", server + "/jobs/batch_size?job_id=" + job_id);
  if (r.status != 200) {
    return nullptr;
  }
  return json::parse(r.body);
}

bool report(const std::string& server, json trial, double energy_j) {
  trial["time"] = 1.0;
  trial["energy"] = energy_j;
  trial["metric"] = 0.9;
  trial["current_epoch"] = 1;
  return http_call("POST", server + "/report", trial.dump()).status == 200;
}

TEST(BsoServer, ASigkillMidRequestLosesNothingAndTheJobContinues) {
  TempDir dir;
  const std::string db = "sqlite:///" + (dir / "bso.db").string();
  auto server = std::make_unique<BsoServerProcess>(db);
  ASSERT_EQ(http_call("POST", server->url() + "/jobs", job_spec("k-1", {16, 32, 64}, 32)).status,
            201);
  // Clients hand out and report trials as fast as they can while the server is killed under
  // them; each trial a client was answered for must be in the database afterwards.
  std::mutex mutex;
  std::map<int64_t, int64_t> answered;  // trial number -> batch size
  std::atomic<bool> stop{false};
  const std::string url = server->url();
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        const json t = next_trial(url, "k-1");
        if (t.is_null()) {
          continue;
        }
        std::lock_guard lock(mutex);
        answered[t["trial_number"]] = t["batch_size"];
      }
    });
  }
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard lock(mutex);
        return answered.size() >= 20;
      },
      std::chrono::seconds(30)));
  server->kill9();
  stop = true;
  for (auto& t : clients) {
    t.join();
  }

  server = std::make_unique<BsoServerProcess>(db);
  const json next = next_trial(server->url(), "k-1");
  ASSERT_FALSE(next.is_null());
  server.reset();
  const auto store = bso::open_store(db);
  const bso::Job job = *store->begin()->lock_job("k-1");
  std::map<int64_t, int64_t> stored;
  for (const auto& t : job.trials) {
    stored[t.trial_number] = t.batch_size;
  }
  for (const auto& [number, bs] : answered) {
    ASSERT_TRUE(stored.contains(number)) << "trial " << number << " was answered, then lost";
    EXPECT_EQ(stored[number], bs);
  }
  EXPECT_EQ(next["trial_number"].get<int64_t>(), static_cast<int64_t>(stored.size()))
      << "the restarted server continued at the next number";
  EXPECT_EQ(stored.rbegin()->first, static_cast<int64_t>(stored.size())) << "no gap, no repeat";
}

TEST(BsoServer, BadFlagsAndUnusableAddressesSayWhatToDo) {
  TempDir dir;
  auto r = run_process({ZEUS_CLI_PATH, "bso-server", "--database", "mysql+asyncmy://u@h/db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("MySQL"));
  r = run_process({ZEUS_CLI_PATH, "bso-server", "--database",
                   "sqlite:///" + (dir / "no" / "such" / "x.db").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot open the batch-size database"));
  r = run_process({ZEUS_CLI_PATH, "bso-server", "--port", "70000"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_process({ZEUS_CLI_PATH, "bso-server", "--policy", "zeus", "--lean", "gamma=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("lean"));
  r = run_process({ZEUS_CLI_PATH, "bso-server", "--trial-timeout", "soon"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--trial-timeout"));

  const BsoServerProcess first("sqlite:///" + (dir / "a.db").string());
  const std::string port = first.url().substr(first.url().rfind(':') + 1);
  r = run_process({ZEUS_CLI_PATH, "bso-server", "--port", port, "--database",
                   "sqlite:///" + (dir / "b.db").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("in use"));
  // The environment names the database when --database does not (upstream's variable).
  const std::map<std::string, std::string> env{
      {"ZEUS_BSO_DATABASE_URL", "sqlite:///" + (dir / "env.db").string()}};
  Child from_env({ZEUS_CLI_PATH, "bso-server", "--port", "0"}, env);
  ASSERT_TRUE(from_env.wait_for_output("(database", std::chrono::seconds(30)));
  EXPECT_THAT(from_env.output(), HasSubstr((dir / "env.db").string()));
  from_env.kill(SIGTERM);
  EXPECT_EQ(from_env.wait().exit_code, 0);
  // A huge body is refused before the service sees it.
  const HttpReply huge =
      http_call("POST", first.url() + "/jobs", std::string(1024 * 1024, ' ') + "{}");
  EXPECT_EQ(huge.status, 413);
}

// One recurrence of tests/bso_upstream/recurring_job.py (upstream Zeus 0.16's client, unchanged)
// against `server`: its JSON line, or null when it printed none.
json upstream_recurrence(const std::filesystem::path& python, const std::string& server,
                         const std::string& job_id, const std::string& mode = "") {
  std::vector<std::string> argv{
      python.string(), std::string(ZEUS_SOURCE_DIR) + "/tests/bso_upstream/recurring_job.py",
      server, job_id};
  if (!mode.empty()) {
    argv.push_back(mode);
  }
  const char* library = std::getenv("ZEUS_NVML_LIBRARY");  // the fake's, set by FakeNvml
  Child child(argv, {{"LD_LIBRARY_PATH", std::filesystem::path(library).parent_path().string()},
                     {"NO_PROXY", "*"},
                     {"PYTHONPATH", std::string(ZEUS_SOURCE_DIR) + "/tests/bso_upstream/no_cuda"},
                     {"PYTHONDONTWRITEBYTECODE", "1"}});
  const ProcessResult r = child.wait();
  const auto brace = r.out.rfind('{');
  return brace == std::string::npos ? json(nullptr) : json::parse(r.out.substr(brace));
}

// Upstream's BatchSizeOptimizer with its ZeusMonitor on the fake NVML, one process per
// recurrence: the pruning hands out 32, 16, 64, then a second round, then the bandit; a client
// that exits early is ended by its atexit, and one killed outright is timed out.
TEST(BsoServer, UpstreamZeusClientDrivesRecurrencesUnchanged) {
  const std::filesystem::path python =
      std::filesystem::path(ZEUS_SOURCE_DIR) / ".venv-bso-zeus016" / "bin" / "python";
  if (!std::filesystem::exists(python)) {
    GTEST_SKIP() << python << " is missing: run scripts/install-bso-upstream.sh (make test does)";
  }
  FakeNvml nvml(four_a40s());
  TempDir dir;
  const std::string db = "sqlite:///" + (dir / "bso.db").string();
  BsoServerProcess server(db, {"--trial-timeout", "2s"});
  std::vector<int> sizes;
  for (int i = 1; i <= 8; ++i) {
    const json r = upstream_recurrence(python, server.url(), "rec-1");
    ASSERT_TRUE(r.is_object()) << "recurrence " << i;
    EXPECT_EQ(r["trial_number"], i);
    EXPECT_GT(r["energy"].get<double>(), 0) << "measured on the fake NVML's counter";
    sizes.push_back(r["batch_size"]);
  }
  EXPECT_EQ(std::vector<int>(sizes.begin(), sizes.begin() + 3), (std::vector<int>{32, 16, 64}));

  const json exited = upstream_recurrence(python, server.url(), "rec-1", "--exit-after-get");
  const json killed = upstream_recurrence(python, server.url(), "rec-1", "--die-after-get");
  ASSERT_TRUE(exited.is_object());
  ASSERT_TRUE(killed.is_object());
  {
    const auto store = bso::open_store(db);
    const bso::Job job = *store->begin()->lock_job("rec-1");
    ASSERT_EQ(job.trials.size(), 10u);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(job.trials[i].status, optimize::bso::TrialStatus::kSucceeded) << i;
    }
    EXPECT_EQ(job.trials[8].status, optimize::bso::TrialStatus::kFailed) << "ended by atexit";
    EXPECT_EQ(job.trials[9].status, optimize::bso::TrialStatus::kDispatched) << "killed";
    EXPECT_EQ(job.stage, optimize::bso::Stage::kMab);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const json after = upstream_recurrence(python, server.url(), "rec-1");
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after["trial_number"], 11);
  const auto store = bso::open_store(db);
  EXPECT_EQ(store->begin()->lock_job("rec-1")->trials[9].status,
            optimize::bso::TrialStatus::kFailed)
      << "the killed client's trial timed out";
}

// Upstream's own server (zeus[bso-server] 0.16 under uvicorn) on a database this one made, and
// zeus bso-server, given the same requests by tests/bso_upstream/parity.py: registration, errors,
// a concurrent trial, a trial ended early, early stop, max_epochs and both pruning rounds must be
// answered alike.
TEST(BsoServer, DecidesAsUpstreamsServerForTheSameRequests) {
  const std::filesystem::path python =
      std::filesystem::path(ZEUS_SOURCE_DIR) / ".venv-bso-zeus016" / "bin" / "python";
  if (!std::filesystem::exists(python)) {
    GTEST_SKIP() << python << " is missing: run scripts/install-bso-upstream.sh (make test does)";
  }
  TempDir dir;
  bso::open_store("sqlite:///" + (dir / "upstream.db").string());  // upstream makes no tables
  const int port = free_port();
  Child upstream(
      {python.string(), "-m", "uvicorn", "zeus.optimizer.batch_size.server.router:app", "--host",
       "127.0.0.1", "--port", std::to_string(port)},
      {{"ZEUS_BSO_DATABASE_URL", "sqlite+aiosqlite:///" + (dir / "upstream.db").string()},
       {"ZEUS_BSO_LOG_LEVEL", "WARNING"},
       {"PYTHONDONTWRITEBYTECODE", "1"}});
  const std::string upstream_url = fmt::format("http://127.0.0.1:{}", port);
  ASSERT_TRUE(eventually([&] { return http_call("GET", upstream_url + "/docs").status == 200; },
                         std::chrono::seconds(60)))
      << "upstream's server did not start";
  const BsoServerProcess ours("sqlite:///" + (dir / "ours.db").string());
  Child parity({python.string(), std::string(ZEUS_SOURCE_DIR) + "/tests/bso_upstream/parity.py",
                upstream_url, ours.url()},
               {{"PYTHONDONTWRITEBYTECODE", "1"}});
  const ProcessResult r = parity.wait();
  upstream.kill(SIGTERM);
  upstream.wait();
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json result = json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GE(result["checked"].get<int>(), 30);
  EXPECT_TRUE(result["ok"].get<bool>()) << result["diffs"].dump(1);
}

class BsoPostgres : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    server_ = PostgresServer::start(why).release();
    if (server_ == nullptr) {
      why_not_ = why;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) {
      ZEUS_SKIP_WITHOUT_SERVER("PostgreSQL cannot start here: " + why_not_);
    }
  }
  static PostgresServer* server_;
  static std::string why_not_;
};
PostgresServer* BsoPostgres::server_ = nullptr;
std::string BsoPostgres::why_not_;

TEST_F(BsoPostgres, TwoServersOnOneDatabaseHandOutEachTrialNumberOnce) {
  const std::string db = server_->create_database("two_servers");
  // Both start at once: the migration runs once, under PostgreSQL's advisory lock.
  std::unique_ptr<BsoServerProcess> a, b;
  std::thread start_b([&] { b = std::make_unique<BsoServerProcess>(db); });
  a = std::make_unique<BsoServerProcess>(db);
  start_b.join();
  ASSERT_EQ(http_call("POST", a->url() + "/jobs", job_spec("pg-1", {16, 32, 64}, 32)).status, 201);
  EXPECT_EQ(http_call("POST", b->url() + "/jobs", job_spec("pg-1", {16, 32, 64}, 32)).status, 200)
      << "the other server sees the job";
  std::mutex mutex;
  std::set<int64_t> numbers;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      const std::string url = c % 2 == 0 ? a->url() : b->url();
      for (int i = 0; i < 15; ++i) {
        const json t = next_trial(url, "pg-1");
        ASSERT_FALSE(t.is_null());
        std::lock_guard lock(mutex);
        EXPECT_TRUE(numbers.insert(t["trial_number"].get<int64_t>()).second)
            << "trial " << t["trial_number"] << " handed out twice";
      }
    });
  }
  for (auto& t : clients) {
    t.join();
  }
  EXPECT_EQ(numbers.size(), 120u);
  EXPECT_EQ(*numbers.rbegin(), 120);
}

TEST_F(BsoPostgres, AJobDecidesAsOnSqliteAndADeleteTakesItAll) {
  const std::string db = server_->create_database("decisions");
  BsoServerProcess s(db);
  ASSERT_EQ(http_call("POST", s.url() + "/jobs", job_spec("d-1", {16, 32, 64, 128}, 32)).status,
            201);
  const std::map<int, double> energy{{16, 400}, {32, 300}, {64, 200}, {128, 1000}};
  std::vector<int> sizes;
  for (int i = 0; i < 9; ++i) {
    const json t = next_trial(s.url(), "d-1");
    ASSERT_FALSE(t.is_null());
    sizes.push_back(t["batch_size"]);
    ASSERT_TRUE(report(s.url(), t, energy.at(t["batch_size"].get<int>())));
  }
  EXPECT_EQ(std::vector<int>(sizes.begin(), sizes.begin() + 7),
            (std::vector<int>{32, 16, 64, 128, 64, 32, 16}));
  const auto store = bso::open_store(db);
  const bso::Job job = *store->begin()->lock_job("d-1");
  EXPECT_EQ(job.stage, optimize::bso::Stage::kMab);
  EXPECT_EQ(job.arms.size(), 3u);
  EXPECT_EQ(job.min_cost, 250.0);
  // Arms of zero variance hold an infinite precision: stored and read back as such.
  for (const auto& [bs, arm] : job.arms) {
    if (arm.num_observations >= 2) {
      EXPECT_TRUE(std::isinf(arm.param_precision)) << bs;
    }
  }
  EXPECT_EQ(http_call("DELETE", s.url() + "/jobs?job_id=d-1").status, 200);
  EXPECT_FALSE(store->begin()->lock_job("d-1"));
}

TEST(BsoServer, AnUnreachablePostgresIsNamedWithoutItsPassword) {
  const int port = free_port();
  const auto r = run_process(
      {ZEUS_CLI_PATH, "bso-server", "--database",
       fmt::format("postgresql+asyncpg://zeus:s3cret@127.0.0.1:{}/bso", port), "--port", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(std::to_string(port)));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace zeus::test
