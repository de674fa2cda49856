// zeus::DataLoader as a client of the batch-size service: recurrences of one 2-rank job under
// `zeus run`, each at the global batch size `zeus bso-server` hands out, each epoch reported, the
// trials as the service stored them; a service that cannot be reached stops the job before
// training, on every rank, naming it.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "bso_support.h"
#include "loader_jobs.h"
#include "zeus/contract/train_result.h"

namespace zeus {
namespace {

using ::testing::HasSubstr;

struct StoredTrial {
  int64_t batch_size = 0;
  std::string status;
  int converged = -1;
  double time_s = 0;
  double energy_j = 0;
};

// The service's rows of `job_id`, by trial number (upstream's table, read as upstream wrote it).
std::map<int64_t, StoredTrial> stored_trials(const fs::path& db_path, const std::string& job_id) {
  std::map<int64_t, StoredTrial> out;
  sqlite3* db = nullptr;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << db_path;
    return out;
  }
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db,
                     R"(SELECT trial_number, batch_size, status, converged, time, energy
                        FROM "Trial" WHERE job_id = ?)",
                     -1, &s, nullptr);
  sqlite3_bind_text(s, 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(s) == SQLITE_ROW) {
    StoredTrial t;
    t.batch_size = sqlite3_column_int64(s, 1);
    t.status = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
    t.converged = sqlite3_column_type(s, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 3);
    t.time_s = sqlite3_column_double(s, 4);
    t.energy_j = sqlite3_column_double(s, 5);
    out[sqlite3_column_int64(s, 0)] = t;
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

std::map<std::string, std::string> service_env(const fs::path& log, const std::string& url) {
  auto env = sim_env(log);
  env["ZEUS_BSO_SERVER_URL"] = url;
  env["ZEUS_BSO_BATCH_SIZES"] = "4,8,16";
  env["ZEUS_JOB_ID"] = "nightly";
  return env;
}

TEST(BsoLoader, EachRecurrenceRunsAtTheServicesBatchSizeAndReportsItsEpochs) {
  test::TempDir dir;
  const fs::path db = dir / "bso.db";
  test::BsoServerProcess server("sqlite:///" + db.string());
  // Upstream's pruning over 4,8,16 from the default (the loader's 4 per rank x 2 ranks): the
  // default, then down, then up; every trial converges at the second epoch.
  const std::vector<int64_t> handed{8, 4, 16};
  for (size_t rec = 0; rec < handed.size(); ++rec) {
    const fs::path log = dir / fmt::format("log{}", rec);
    const Job job =
        run_job(service_env(log, server.url()), {"--max-epochs", "3", "--metrics", "0.1,0.9"});
    ASSERT_EQ(job.result.exit_code, 0) << job.output;
    const fs::path path = log / fmt::format("nightly+bs{}.train.json", handed[rec]);
    ASSERT_TRUE(fs::exists(path)) << "recurrence " << rec << ": " << job.output;
    // Every file of the job is named by the size it ran at: profile and power logs too.
    EXPECT_TRUE(fs::exists(log / fmt::format("bs{}.power.json", handed[rec])));
    EXPECT_TRUE(fs::exists(log / fmt::format("bs{}+e0+gpu0.power.log", handed[rec])));
    const contract::TrainResult r = contract::load_train_result(path);
    EXPECT_TRUE(r.reached);
    EXPECT_EQ(r.num_epochs, 2);
    // Both ranks ran at the handed size: the samples per rank split in batches of half of it.
    EXPECT_EQ(count(job.output, fmt::format("epochs=2 samples=800 stop=target_reached")), 2)
        << job.output;

    const auto trials = stored_trials(db, "nightly");
    ASSERT_EQ(trials.size(), rec + 1);
    const StoredTrial& t = trials.at(static_cast<int64_t>(rec) + 1);
    EXPECT_EQ(t.batch_size, handed[rec]);
    EXPECT_EQ(t.status, "Succeeded");
    EXPECT_EQ(t.converged, 1);
    // What the service stored is what the job measured (its totals at the converged epoch).
    EXPECT_NEAR(t.time_s, r.time_s, 1e-6 * r.time_s);
    EXPECT_NEAR(t.energy_j, r.energy_j, 1e-6 * r.energy_j);
  }

  // A recurrence that never reaches the target: it stops at max_epochs, and the service ends the
  // trial unconverged, as upstream's does; or its forecast crosses the service's threshold first,
  // and the job ends the trial itself (Failed), as upstream's client does at exit.
  const fs::path log = dir / "log-miss";
  const Job miss =
      run_job(service_env(log, server.url()), {"--max-epochs", "3", "--metrics", "0.1"});
  const auto trials = stored_trials(db, "nightly");
  ASSERT_EQ(trials.size(), 4u) << miss.output;
  const StoredTrial& t = trials.at(4);
  const fs::path path = log / fmt::format("nightly+bs{}.train.json", t.batch_size);
  ASSERT_TRUE(fs::exists(path)) << miss.output;
  const contract::TrainResult r = contract::load_train_result(path);
  EXPECT_FALSE(r.reached);
  if (r.stop_reason == contract::StopReason::kMaxEpochs) {
    EXPECT_EQ(miss.result.exit_code, 0) << miss.output;
    EXPECT_EQ(t.status, "Succeeded");
    EXPECT_EQ(t.converged, 0);
    EXPECT_NEAR(t.energy_j, r.energy_j, 1e-6 * r.energy_j);
  } else {
    EXPECT_EQ(r.stop_reason, contract::StopReason::kCostThreshold);
    EXPECT_EQ(t.status, "Failed") << miss.output;
  }

  // Another max_epochs is another spec under the same job id: refused before training.
  const Job other = run_job(service_env(dir / "log-other", server.url()), {"--max-epochs", "2"});
  EXPECT_NE(other.result.exit_code, 0);
  EXPECT_THAT(other.output, HasSubstr("HTTP 409"));
  EXPECT_THAT(other.output, HasSubstr("new job id"));
  EXPECT_EQ(stored_trials(db, "nightly").size(), 4u) << "no trial for a refused job";
}

TEST(BsoLoader, AnUnreachableServiceStopsTheJobBeforeTrainingOnEveryRank) {
  test::TempDir dir;
  const std::string url = fmt::format("http://127.0.0.1:{}", test::free_port());
  const Job job = run_job(service_env(dir / "log", url), {"--max-epochs", "2"});
  EXPECT_NE(job.result.exit_code, 0);
  EXPECT_THAT(job.output, HasSubstr("cannot reach the batch-size service at " + url));
  EXPECT_THAT(job.output, HasSubstr("failed on rank 0"));
  EXPECT_EQ(count(job.output, "epoch 1:"), 0) << "no epoch ran\n" << job.output;
}

}  // namespace
}  // namespace zeus
