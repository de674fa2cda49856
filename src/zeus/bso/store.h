// Where the batch-size service keeps its jobs: upstream Zeus 0.16's tables (ref-zeus016.md 2.4),
// behind one small interface with a backend per database (sqlite/, postgres/), the way device/
// has nvml/ and sim/. The service holds no job state in memory: every request is one
// transaction that locks the job it touches, so two servers on one database decide as one.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "zeus/optimize/bso_server_rules.h"

namespace zeus::bso {

using optimize::bso::ArmState;
using optimize::bso::Job;
using optimize::bso::Trial;

// The database failed or refused (cannot open, locked too long, a statement failed, a schema
// too new). Its message names the database and what to do.
class DatabaseError : public Error {
 public:
  using Error::Error;
};

// One unit of work, all or nothing: destroyed without commit() it rolls back. Contract:
// lock_job(id) in one transaction excludes lock_job(id) in every other transaction, in this
// process and in any other on the same database, until the first one ends. Throws DatabaseError
// for a database failure, naming the database and the statement.
class Transaction {
 public:
  virtual ~Transaction() = default;

  // The job with its trials (in trial_number order) and arms, locked until the transaction ends;
  // std::nullopt when there is none.
  virtual std::optional<Job> lock_job(const std::string& job_id) = 0;
  // A new job with its BatchSize rows (no trials, no arms). False when a job with its id was
  // inserted by another transaction that committed meanwhile (then this transaction is spent:
  // the caller starts over).
  virtual bool insert_job(const Job& job) = 0;
  // The job's stage, min_cost, min_cost_batch_size and generator state.
  virtual void update_job(const Job& job) = 0;
  virtual void insert_trial(const std::string& job_id, const Trial& trial) = 0;
  // The trial's status, end, time, energy and converged.
  virtual void update_trial(const std::string& job_id, const Trial& trial) = 0;
  virtual void put_arm(const std::string& job_id, int64_t batch_size, const ArmState& arm) = 0;
  // The job and everything of it; false when there was none.
  virtual bool delete_job(const std::string& job_id) = 0;

  virtual void commit() = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  // Safe from many threads at once; each transaction uses a connection of its own.
  virtual std::unique_ptr<Transaction> begin() = 0;
  // For messages and logs: the database without its password ("sqlite:///var/lib/bso.db").
  virtual std::string describe() const = 0;
};

// The schema version this build writes. Migrations run at open, under the database's own lock,
// so two servers starting at once on one database apply each step once; a database of a newer
// version is refused with a message naming both versions.
inline constexpr int kSchemaVersion = 2;

struct StoreOptions {
  // How long a transaction waits for another one's lock before failing (SQLite's busy timeout).
  std::chrono::milliseconds lock_wait{30'000};
};

// Opens the database a URL names: sqlite:///path (relative to the working directory),
// sqlite:////abs/path, sqlite+aiosqlite:// (upstream's), postgresql://user[:pw]@host[:port]/db and
// postgresql+asyncpg://. MySQL and other schemes throw ConfigError saying what is supported.
// Applies the migrations. Throws DatabaseError when the database cannot be opened or is too new.
std::unique_ptr<Store> open_store(const std::string& url, const StoreOptions& options = {});

}  // namespace zeus::bso
