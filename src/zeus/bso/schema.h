// The batch-size service's schema: upstream Zeus 0.16's four tables exactly as SQLAlchemy
// creates them from zeus/optimizer/batch_size/server/database/schema.py (so a database made by
// upstream opens here and one made here opens there), and the text forms of its enums and
// timestamps. Shared by the sqlite/ and postgres/ backends.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimize/bso_server_rules.h"

namespace zeus::bso {

enum class Dialect { kSqlite, kPostgres };

// One migration step: the statements that take a database from version `version - 1` to
// `version`. Step 1 creates upstream's tables where they are missing (a database made by
// upstream's server is at version 0 with its tables in place); step 2 zeus-cpp's own (the
// policy of a job, the epochs of a trial).
struct Migration {
  int version;
  std::vector<std::string> statements;
};
std::vector<Migration> migrations(Dialect dialect);

// SQLAlchemy's Enum columns hold the member names.
std::string_view stage_name(optimize::bso::Stage stage);
std::string_view trial_type_name(optimize::bso::TrialType type);
std::string_view trial_status_name(optimize::bso::TrialStatus status);
// Throw DatabaseError naming the column and the value for a name upstream does not have.
optimize::bso::Stage parse_stage(std::string_view name);
optimize::bso::TrialType parse_trial_type(std::string_view name);
optimize::bso::TrialStatus parse_trial_status(std::string_view name);

// SQLAlchemy's DateTime on SQLite: "YYYY-MM-DD HH:MM:SS.ffffff", naive (written here in UTC).
// Parsing also takes PostgreSQL's text form and omitted fractions.
std::string format_timestamp(std::chrono::system_clock::time_point t);
std::chrono::system_clock::time_point parse_timestamp(std::string_view text);

}  // namespace zeus::bso
