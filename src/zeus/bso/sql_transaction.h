// The Transaction and the migrations of both SQL backends, over SqlSession, with a pool of
// sessions: one statement text per operation for SQLite and PostgreSQL alike.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zeus/bso/sql_session.h"
#include "zeus/bso/store.h"

namespace zeus::bso {

// A Store over any SqlSession: sessions are made by `connect`, pooled, and each transaction
// takes one for its lifetime.
class SqlStore : public Store {
 public:
  using Connect = std::function<std::unique_ptr<SqlSession>()>;
  // Connects once and applies the migrations under the database's lock (`migration_lock`: a
  // statement run first in the migration's transaction, "" when BEGIN already excludes others).
  // `one_writer_at_a_time`: the database takes one writer at a time anyway (SQLite), so this
  // process's transactions queue on a mutex instead of SQLite's busy handler, which sleeps 1 to
  // 100 ms between tries. Other processes on the file still wait on the database's own lock.
  SqlStore(Connect connect, std::string description, const std::string& migration_lock,
           bool one_writer_at_a_time);

  std::unique_ptr<Transaction> begin() override;
  std::string describe() const override { return description_; }

  void release(std::unique_ptr<SqlSession> session);

 private:
  void migrate(SqlSession& s, const std::string& migration_lock);

  Connect connect_;
  std::string description_;
  bool one_writer_at_a_time_;
  std::mutex writer_;
  std::mutex mutex_;  // idle_
  std::vector<std::unique_ptr<SqlSession>> idle_;
};

}  // namespace zeus::bso
