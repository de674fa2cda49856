#include "zeus/bso/schema.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "zeus/bso/store.h"

namespace zeus::bso {

namespace {

using optimize::bso::Stage;
using optimize::bso::TrialStatus;
using optimize::bso::TrialType;

// The column types that differ: SQLAlchemy's DATETIME and VARCHAR enums on SQLite, TIMESTAMP and
// native enum types on PostgreSQL.
struct Types {
  const char* timestamp;
  const char* stage;
  const char* trial_type;
  const char* trial_status;
};

std::vector<std::string> upstream_tables(Dialect dialect) {
  const Types t = dialect == Dialect::kSqlite
                      ? Types{"DATETIME", "VARCHAR(7)", "VARCHAR(11)", "VARCHAR(10)"}
                      : Types{"TIMESTAMP WITHOUT TIME ZONE", "stage", "trialtype", "trialstatus"};
  std::vector<std::string> out;
  if (dialect == Dialect::kPostgres) {
    // CREATE TYPE has no IF NOT EXISTS: a DO block skips the ones upstream made.
    for (const auto& [name, values] : std::array<std::pair<const char*, const char*>, 3>{
             {{"stage", "'Pruning', 'MAB'"},
              {"trialtype", "'Exploration', 'Concurrent', 'MAB'"},
              {"trialstatus", "'Dispatched', 'Succeeded', 'Failed'"}}}) {
      out.push_back(fmt::format(
          "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = '{0}') THEN "
          "CREATE TYPE {0} AS ENUM ({1}); END IF; END $$",
          name, values));
    }
  }
  out.push_back(fmt::format(R"(CREATE TABLE IF NOT EXISTS "Job" (
  job_id VARCHAR(400) NOT NULL,
  job_id_prefix VARCHAR(300) NOT NULL,
  default_batch_size INTEGER NOT NULL,
  higher_is_better_metric BOOLEAN NOT NULL,
  eta_knob FLOAT NOT NULL,
  beta_knob FLOAT,
  target_metric FLOAT NOT NULL,
  max_epochs INTEGER NOT NULL,
  num_pruning_rounds INTEGER NOT NULL,
  window_size INTEGER NOT NULL,
  max_power FLOAT NOT NULL,
  number_of_gpus INTEGER NOT NULL,
  gpu_model VARCHAR(30) NOT NULL,
  mab_prior_mean FLOAT NOT NULL,
  mab_prior_precision FLOAT NOT NULL,
  mab_num_explorations INTEGER NOT NULL,
  mab_seed INTEGER,
  mab_random_generator_state VARCHAR(10000),
  exp_default_batch_size INTEGER NOT NULL,
  stage {} NOT NULL,
  min_cost FLOAT,
  min_cost_batch_size INTEGER NOT NULL,
  PRIMARY KEY (job_id)
))",
                            t.stage));
  out.push_back(R"(CREATE TABLE IF NOT EXISTS "BatchSize" (
  job_id VARCHAR(400) NOT NULL,
  batch_size INTEGER NOT NULL,
  PRIMARY KEY (job_id, batch_size),
  FOREIGN KEY(job_id) REFERENCES "Job" (job_id) ON DELETE CASCADE
))");
  out.push_back(R"(CREATE TABLE IF NOT EXISTS "GaussianTsArmState" (
  job_id VARCHAR(300) NOT NULL,
  batch_size INTEGER NOT NULL,
  param_mean FLOAT NOT NULL,
  param_precision FLOAT NOT NULL,
  reward_precision FLOAT NOT NULL,
  num_observations INTEGER NOT NULL,
  PRIMARY KEY (job_id, batch_size),
  FOREIGN KEY(job_id, batch_size) REFERENCES "BatchSize" (job_id, batch_size) ON DELETE CASCADE
))");
  out.push_back(fmt::format(R"(CREATE TABLE IF NOT EXISTS "Trial" (
  job_id VARCHAR(300) NOT NULL,
  batch_size INTEGER NOT NULL,
  trial_number INTEGER NOT NULL,
  start_timestamp {0} NOT NULL,
  type {1} NOT NULL,
  status {2} NOT NULL,
  end_timestamp {0},
  time FLOAT,
  energy FLOAT,
  converged BOOLEAN,
  PRIMARY KEY (job_id, trial_number),
  FOREIGN KEY(job_id, batch_size) REFERENCES "BatchSize" (job_id, batch_size) ON DELETE CASCADE
))",
                            t.timestamp, t.trial_type, t.trial_status));
  return out;
}

template <typename E, size_t N>
E parse_enum(std::string_view column, std::string_view name,
             const std::array<std::pair<std::string_view, E>, N>& table) {
  for (const auto& [text, value] : table) {
    if (text == name) {
      return value;
    }
  }
  throw DatabaseError(
      fmt::format("the batch-size database holds '{}' in column {}, which is not "
                  "one of upstream Zeus 0.16's values: was it written by another "
                  "program?",
                  name, column));
}

constexpr std::array<std::pair<std::string_view, Stage>, 2> kStages{
    {{"Pruning", Stage::kPruning}, {"MAB", Stage::kMab}}};
constexpr std::array<std::pair<std::string_view, TrialType>, 3> kTypes{
    {{"Exploration", TrialType::kExploration},
     {"Concurrent", TrialType::kConcurrent},
     {"MAB", TrialType::kMab}}};
constexpr std::array<std::pair<std::string_view, TrialStatus>, 3> kStatuses{
    {{"Dispatched", TrialStatus::kDispatched},
     {"Succeeded", TrialStatus::kSucceeded},
     {"Failed", TrialStatus::kFailed}}};

template <typename E, size_t N>
std::string_view enum_name(E value, const std::array<std::pair<std::string_view, E>, N>& table) {
  for (const auto& [text, v] : table) {
    if (v == value) {
      return text;
    }
  }
  return table[0].first;
}

}  // namespace

std::vector<Migration> migrations(Dialect dialect) {
  return {
      Migration{1, upstream_tables(dialect)},
      // zeus-cpp's own columns, in tables of their own so upstream's server still opens the
      // database (it reads only its four): a job's policy, a trial's epochs and lean's cap.
      // A job without a row here is upstream's: policy zeus.
      Migration{2,
                {R"(CREATE TABLE IF NOT EXISTS zeus_cpp_job_policy (
  job_id VARCHAR(400) NOT NULL,
  policy VARCHAR(16) NOT NULL,
  lean VARCHAR(200) NOT NULL,
  PRIMARY KEY (job_id)
))",
                 R"(CREATE TABLE IF NOT EXISTS zeus_cpp_trial (
  job_id VARCHAR(300) NOT NULL,
  trial_number INTEGER NOT NULL,
  epochs INTEGER,
  epoch_cap INTEGER,
  PRIMARY KEY (job_id, trial_number)
))"}},
  };
}

std::string_view stage_name(Stage stage) {
  return enum_name(stage, kStages);
}
std::string_view trial_type_name(TrialType type) {
  return enum_name(type, kTypes);
}
std::string_view trial_status_name(TrialStatus status) {
  return enum_name(status, kStatuses);
}
Stage parse_stage(std::string_view name) {
  return parse_enum("Job.stage", name, kStages);
}
TrialType parse_trial_type(std::string_view name) {
  return parse_enum("Trial.type", name, kTypes);
}
TrialStatus parse_trial_status(std::string_view name) {
  return parse_enum("Trial.status", name, kStatuses);
}

std::string format_timestamp(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::floor<std::chrono::microseconds>(t);
  const auto s = std::chrono::floor<std::chrono::seconds>(us);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:06d}",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(s)), (us - s).count());
}

std::chrono::system_clock::time_point parse_timestamp(std::string_view text) {
  std::tm tm{};
  int used = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%*1[ T]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6) {
    throw DatabaseError(fmt::format(
        "the batch-size database holds a timestamp '{}' that is not 'YYYY-MM-DD HH:MM:SS'", text));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  auto t = std::chrono::system_clock::from_time_t(::timegm(&tm));
  if (static_cast<size_t>(used) < s.size() && s[static_cast<size_t>(used)] == '.') {
    std::string digits;
    for (size_t i = static_cast<size_t>(used) + 1;
         i < s.size() && digits.size() < 6 && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      digits += s[i];
    }
    digits.resize(6, '0');
    t += std::chrono::microseconds(std::stol(digits));
  }
  return t;
}

}  // namespace zeus::bso
