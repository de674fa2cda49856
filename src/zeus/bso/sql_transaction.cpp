#include "zeus/bso/sql_transaction.h"

#include <fmt/format.h>

#include <array>

namespace zeus::bso {

namespace {

constexpr const char* kSelectJob =
    R"(SELECT job_id, job_id_prefix, default_batch_size, higher_is_better_metric, eta_knob,
  beta_knob, target_metric, max_epochs, num_pruning_rounds, window_size, max_power,
  number_of_gpus, gpu_model, mab_prior_mean, mab_prior_precision, mab_num_explorations, mab_seed,
  mab_random_generator_state, exp_default_batch_size, stage, min_cost, min_cost_batch_size
FROM "Job" WHERE job_id = $1)";
constexpr const char* kSelectBatchSizes =
    R"(SELECT batch_size FROM "BatchSize" WHERE job_id = $1 ORDER BY batch_size)";
constexpr const char* kSelectTrials =
    R"(SELECT trial_number, batch_size, type, status, time, energy, converged, start_timestamp,
  end_timestamp FROM "Trial" WHERE job_id = $1 ORDER BY trial_number)";
constexpr const char* kSelectArms =
    R"(SELECT batch_size, param_mean, param_precision, reward_precision, num_observations
FROM "GaussianTsArmState" WHERE job_id = $1)";
constexpr const char* kInsertJob =
    R"(INSERT INTO "Job" (job_id, job_id_prefix, default_batch_size, higher_is_better_metric,
  eta_knob, beta_knob, target_metric, max_epochs, num_pruning_rounds, window_size, max_power,
  number_of_gpus, gpu_model, mab_prior_mean, mab_prior_precision, mab_num_explorations, mab_seed,
  mab_random_generator_state, exp_default_batch_size, stage, min_cost, min_cost_batch_size)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
  $20, $21, $22) ON CONFLICT (job_id) DO NOTHING)";
constexpr const char* kInsertBatchSize =
    R"(INSERT INTO "BatchSize" (job_id, batch_size) VALUES ($1, $2))";
constexpr const char* kUpdateJob =
    R"(UPDATE "Job" SET stage = $1, min_cost = $2, min_cost_batch_size = $3,
  mab_random_generator_state = $4 WHERE job_id = $5)";
constexpr const char* kInsertTrial =
    R"(INSERT INTO "Trial" (job_id, batch_size, trial_number, start_timestamp, type, status,
  end_timestamp, time, energy, converged) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10))";
constexpr const char* kUpdateTrial =
    R"(UPDATE "Trial" SET status = $1, end_timestamp = $2, time = $3, energy = $4,
  converged = $5 WHERE job_id = $6 AND trial_number = $7)";
constexpr const char* kPutArm =
    R"(INSERT INTO "GaussianTsArmState" (job_id, batch_size, param_mean, param_precision,
  reward_precision, num_observations) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (job_id, batch_size) DO UPDATE SET param_mean = excluded.param_mean,
  param_precision = excluded.param_precision, reward_precision = excluded.reward_precision,
  num_observations = excluded.num_observations)";
constexpr const char* kSelectPolicy =
    R"(SELECT policy, lean FROM zeus_cpp_job_policy WHERE job_id = $1)";
constexpr const char* kSelectTrialExtras =
    R"(SELECT trial_number, epochs, epoch_cap FROM zeus_cpp_trial WHERE job_id = $1)";
constexpr const char* kInsertPolicy =
    R"(INSERT INTO zeus_cpp_job_policy (job_id, policy, lean) VALUES ($1, $2, $3))";
constexpr const char* kPutTrialExtras =
    R"(INSERT INTO zeus_cpp_trial (job_id, trial_number, epochs, epoch_cap) VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id, trial_number) DO UPDATE SET epochs = excluded.epochs,
  epoch_cap = excluded.epoch_cap)";
constexpr const char* kDeletePolicy = R"(DELETE FROM zeus_cpp_job_policy WHERE job_id = $1)";
constexpr const char* kDeleteTrialExtras = R"(DELETE FROM zeus_cpp_trial WHERE job_id = $1)";
constexpr const char* kDeleteArms = R"(DELETE FROM "GaussianTsArmState" WHERE job_id = $1)";
constexpr const char* kDeleteTrials = R"(DELETE FROM "Trial" WHERE job_id = $1)";
constexpr const char* kDeleteBatchSizes = R"(DELETE FROM "BatchSize" WHERE job_id = $1)";
constexpr const char* kDeleteJob = R"(DELETE FROM "Job" WHERE job_id = $1)";

constexpr const char* kCreateVersions =
    "CREATE TABLE IF NOT EXISTS zeus_cpp_schema_version (version INTEGER NOT NULL, "
    "applied_at VARCHAR(32) NOT NULL)";
constexpr const char* kSelectVersion =
    "SELECT COALESCE(MAX(version), 0) FROM zeus_cpp_schema_version";
constexpr const char* kInsertVersion =
    "INSERT INTO zeus_cpp_schema_version (version, applied_at) VALUES ($1, $2)";

template <size_t N>
int64_t run(SqlSession& s, const char* sql, const std::array<SqlParam, N>& params,
            const std::function<void(const SqlRow&)>& on_row = {}) {
  return s.run(sql, std::span<const SqlParam>(params.data(), N), on_row);
}

SqlParam end_param(const Trial& t) {
  return t.end ? SqlParam{format_timestamp(*t.end)} : SqlParam{};
}

class SqlTransaction final : public Transaction {
 public:
  SqlTransaction(SqlStore& store, std::unique_ptr<SqlSession> s,
                 std::unique_lock<std::mutex> writer)
      : store_(store), writer_(std::move(writer)), s_(std::move(s)) {
    s_->exec(s_->begin_statement());
  }
  ~SqlTransaction() override {
    if (open_) {
      try {
        s_->exec("ROLLBACK");
      } catch (const std::exception&) {
        return;  // a broken connection is dropped, not pooled
      }
    }
    store_.release(std::move(s_));
  }

  std::optional<Job> lock_job(const std::string& job_id) override {
    std::optional<Job> found;
    const std::array<SqlParam, 1> id{job_id};
    // PostgreSQL: the row lock that makes a job's requests take turns across servers. (SQLite's
    // BEGIN IMMEDIATE already holds the whole database.) A static string: its address keys the
    // backends' prepared-statement caches.
    static const std::string for_update = std::string(kSelectJob) + " FOR UPDATE";
    run(*s_, s_->dialect() == Dialect::kPostgres ? for_update.c_str() : kSelectJob, id,
        [&](const SqlRow& q) {
          Job& job = found.emplace();
          auto& p = job.params;
          p.job_id = q.text(0);
          p.job_id_prefix = q.text(1);
          p.default_batch_size = q.i64(2);
          p.higher_is_better_metric = q.boolean(3);
          p.eta_knob = q.f64(4);
          p.beta_knob = q.opt_f64(5);
          p.target_metric = q.f64(6);
          p.max_epochs = q.i64(7);
          p.num_pruning_rounds = q.i64(8);
          p.window_size = q.i64(9);
          p.max_power_w = q.f64(10);
          p.number_of_gpus = q.i64(11);
          p.gpu_model = q.text(12);
          p.mab_prior_mean = q.f64(13);
          p.mab_prior_precision = q.f64(14);
          p.mab_num_explorations = q.i64(15);
          p.mab_seed = q.opt_i64(16);
          job.rng_state = q.opt_text(17);
          job.exp_default_batch_size = q.i64(18);
          job.stage = parse_stage(q.text(19));
          job.min_cost = q.opt_f64(20);
          job.min_cost_batch_size = q.i64(21);
        });
    if (!found) {
      return std::nullopt;
    }
    Job& job = *found;
    run(*s_, kSelectBatchSizes, id,
        [&](const SqlRow& q) { job.params.batch_sizes.push_back(q.i64(0)); });
    run(*s_, kSelectTrials, id, [&](const SqlRow& q) {
      Trial& t = job.trials.emplace_back();
      t.trial_number = q.i64(0);
      t.batch_size = q.i64(1);
      t.type = parse_trial_type(q.text(2));
      t.status = parse_trial_status(q.text(3));
      t.time_s = q.opt_f64(4);
      t.energy_j = q.opt_f64(5);
      if (!q.null(6)) {
        t.converged = q.boolean(6);
      }
      t.start = parse_timestamp(q.text(7));
      if (!q.null(8)) {
        t.end = parse_timestamp(q.text(8));
      }
    });
    run(*s_, kSelectArms, id, [&](const SqlRow& q) {
      job.arms[q.i64(0)] = ArmState{q.f64(1), q.f64(2), q.f64(3), q.i64(4)};
    });
    run(*s_, kSelectPolicy, id, [&](const SqlRow& q) {
      job.params.policy = optimize::parse_policy_choice(q.text(0), q.text(1));
    });
    run(*s_, kSelectTrialExtras, id, [&](const SqlRow& q) {
      const int64_t number = q.i64(0);
      for (Trial& t : job.trials) {
        if (t.trial_number == number) {
          t.epochs = q.opt_i64(1);
          t.epoch_cap = q.opt_i64(2);
        }
      }
    });
    return found;
  }

  bool insert_job(const Job& job) override {
    const auto& p = job.params;
    const int64_t inserted =
        run(*s_, kInsertJob,
            std::array<SqlParam, 22>{p.job_id,
                                     p.job_id_prefix,
                                     p.default_batch_size,
                                     sql_param(p.higher_is_better_metric),
                                     p.eta_knob,
                                     sql_param(p.beta_knob),
                                     p.target_metric,
                                     p.max_epochs,
                                     p.num_pruning_rounds,
                                     p.window_size,
                                     p.max_power_w,
                                     p.number_of_gpus,
                                     p.gpu_model,
                                     p.mab_prior_mean,
                                     p.mab_prior_precision,
                                     p.mab_num_explorations,
                                     sql_param(p.mab_seed),
                                     sql_param(job.rng_state),
                                     job.exp_default_batch_size,
                                     sql_param(stage_name(job.stage)),
                                     sql_param(job.min_cost),
                                     job.min_cost_batch_size.value_or(p.default_batch_size)});
    if (inserted == 0) {
      return false;
    }
    for (int64_t bs : p.batch_sizes) {
      run(*s_, kInsertBatchSize, std::array<SqlParam, 2>{p.job_id, bs});
    }
    const bool is_lean = p.policy.policy == optimize::BsoPolicy::kLean;
    run(*s_, kInsertPolicy,
        std::array<SqlParam, 3>{p.job_id, sql_param(optimize::to_string(p.policy.policy)),
                                is_lean ? optimize::to_string(p.policy.lean) : std::string()});
    return true;
  }

  void update_job(const Job& job) override {
    run(*s_, kUpdateJob,
        std::array<SqlParam, 5>{sql_param(stage_name(job.stage)), sql_param(job.min_cost),
                                job.min_cost_batch_size.value_or(job.params.default_batch_size),
                                sql_param(job.rng_state), job.params.job_id});
  }

  void insert_trial(const std::string& job_id, const Trial& t) override {
    run(*s_, kInsertTrial,
        std::array<SqlParam, 10>{
            job_id, t.batch_size, t.trial_number, format_timestamp(t.start),
            sql_param(trial_type_name(t.type)), sql_param(trial_status_name(t.status)),
            end_param(t), sql_param(t.time_s), sql_param(t.energy_j), sql_param(t.converged)});
    put_extras(job_id, t);
  }

  void update_trial(const std::string& job_id, const Trial& t) override {
    run(*s_, kUpdateTrial,
        std::array<SqlParam, 7>{sql_param(trial_status_name(t.status)), end_param(t),
                                sql_param(t.time_s), sql_param(t.energy_j), sql_param(t.converged),
                                job_id, t.trial_number});
    put_extras(job_id, t);
  }

  // zeus-cpp's columns of a trial, where it has any.
  void put_extras(const std::string& job_id, const Trial& t) {
    if (t.epochs || t.epoch_cap) {
      run(*s_, kPutTrialExtras,
          std::array<SqlParam, 4>{job_id, t.trial_number, sql_param(t.epochs),
                                  sql_param(t.epoch_cap)});
    }
  }

  void put_arm(const std::string& job_id, int64_t batch_size, const ArmState& a) override {
    run(*s_, kPutArm,
        std::array<SqlParam, 6>{job_id, batch_size, a.param_mean, a.param_precision,
                                a.reward_precision, a.num_observations});
  }

  bool delete_job(const std::string& job_id) override {
    // Children first: upstream's SQLite connections leave foreign keys off, so its rows need
    // not cascade; this order is right either way.
    const std::array<SqlParam, 1> id{job_id};
    for (const char* sql :
         {kDeleteArms, kDeleteTrials, kDeleteBatchSizes, kDeletePolicy, kDeleteTrialExtras}) {
      run(*s_, sql, id);
    }
    return run(*s_, kDeleteJob, id) > 0;
  }

  void commit() override {
    s_->exec("COMMIT");
    open_ = false;
  }

 private:
  SqlStore& store_;
  std::unique_lock<std::mutex> writer_;  // released after the rollback or commit
  std::unique_ptr<SqlSession> s_;
  bool open_ = true;
};

}  // namespace

SqlStore::SqlStore(Connect connect, std::string description, const std::string& migration_lock,
                   bool one_writer_at_a_time)
    : connect_(std::move(connect)),
      description_(std::move(description)),
      one_writer_at_a_time_(one_writer_at_a_time) {
  auto s = connect_();
  migrate(*s, migration_lock);
  release(std::move(s));
}

std::unique_ptr<Transaction> SqlStore::begin() {
  std::unique_ptr<SqlSession> s;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      s = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!s) {
    s = connect_();
  }
  std::unique_lock<std::mutex> writer;
  if (one_writer_at_a_time_) {
    writer = std::unique_lock(writer_);
  }
  return std::make_unique<SqlTransaction>(*this, std::move(s), std::move(writer));
}

void SqlStore::release(std::unique_ptr<SqlSession> session) {
  std::lock_guard lock(mutex_);
  idle_.push_back(std::move(session));
}

void SqlStore::migrate(SqlSession& s, const std::string& migration_lock) {
  s.exec(s.begin_statement());
  try {
    if (!migration_lock.empty()) {
      s.exec(migration_lock);
    }
    s.exec(kCreateVersions);
    int64_t current = 0;
    s.run(kSelectVersion, {}, [&](const SqlRow& row) { current = row.i64(0); });
    if (current > kSchemaVersion) {
      throw DatabaseError(fmt::format(
          "the batch-size database {} has schema version {}, newer than this zeus-cpp's {}: run "
          "the newer zeus bso-server, or give this one another database",
          description_, current, kSchemaVersion));
    }
    for (const Migration& m : migrations(s.dialect())) {
      if (m.version <= current) {
        continue;
      }
      for (const std::string& sql : m.statements) {
        s.exec(sql);
      }
      run(s, kInsertVersion,
          std::array<SqlParam, 2>{int64_t{m.version},
                                  format_timestamp(std::chrono::system_clock::now())});
    }
    s.exec("COMMIT");
  } catch (...) {
    try {
      s.exec("ROLLBACK");
    } catch (const std::exception&) {  // the first error is the one to report
    }
    throw;
  }
}

}  // namespace zeus::bso
