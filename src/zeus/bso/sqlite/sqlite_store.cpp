#include "zeus/bso/sqlite/sqlite_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "zeus/bso/sql_transaction.h"

namespace zeus::bso {

namespace {

class Row final : public SqlRow {
 public:
  explicit Row(sqlite3_stmt* stmt) : stmt_(stmt) {}
  bool null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t i64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double f64(int col) const override { return sqlite3_column_double(stmt_, col); }
  bool boolean(int col) const override { return sqlite3_column_int64(stmt_, col) != 0; }
  std::string text(int col) const override {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p != nullptr ? std::string(reinterpret_cast<const char*>(p),
                                      static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
                        : std::string();
  }

 private:
  sqlite3_stmt* stmt_;
};

// One connection, used by one transaction at a time, with its prepared statements kept (the
// service runs the same dozen statements over and over).
class Connection final : public SqlSession {
 public:
  Connection(const std::string& path, const StoreOptions& options) : path_(path) {
    const int rc =
        sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string what = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      throw DatabaseError(fmt::format(
          "cannot open the batch-size database {}: {} (is its directory there and writable?)", path,
          what));
    }
    sqlite3_busy_timeout(db_, static_cast<int>(options.lock_wait.count()));
    enter_wal(options.lock_wait);
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
  }
  ~Connection() override {
    for (auto& [sql, stmt] : statements_) {
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Dialect dialect() const override { return Dialect::kSqlite; }
  const char* begin_statement() const override { return "BEGIN IMMEDIATE"; }

  void exec(const std::string& sql) override {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string what = error != nullptr ? error : sqlite3_errmsg(db_);
      sqlite3_free(error);
      fail(sql, what);
    }
  }

  int64_t run(const char* sql, std::span<const SqlParam> params,
              const std::function<void(const SqlRow&)>& on_row) override {
    sqlite3_stmt* stmt = statement(sql);
    int i = 0;
    for (const SqlParam& p : params) {
      ++i;
      const int rc = std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
              return sqlite3_bind_null(stmt, i);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              return sqlite3_bind_int64(stmt, i, v);
            } else if constexpr (std::is_same_v<T, double>) {
              return sqlite3_bind_double(stmt, i, v);
            } else {
              return sqlite3_bind_text(stmt, i, v.data(), static_cast<int>(v.size()),
                                       SQLITE_STATIC);
            }
          },
          p);
      if (rc != SQLITE_OK) {
        fail(sql, sqlite3_errmsg(db_));
      }
    }
    const Row row(stmt);
    for (;;) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        if (on_row) {
          on_row(row);
        }
        continue;
      }
      if (rc != SQLITE_DONE) {
        const std::string what = sqlite3_errmsg(db_);
        sqlite3_reset(stmt);
        fail(sql, what);
      }
      break;
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return sqlite3_changes(db_);
  }

 private:
  // The statement for `sql` (a string literal: its address is the cache key).
  sqlite3_stmt* statement(const char* sql) {
    auto [it, fresh] = statements_.try_emplace(sql, nullptr);
    if (fresh) {
      if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &it->second, nullptr) !=
          SQLITE_OK) {
        statements_.erase(it);
        fail(sql, sqlite3_errmsg(db_));
      }
    }
    return it->second;
  }

  [[noreturn]] void fail(std::string_view sql, std::string_view what) const {
    const std::string head(sql.substr(0, sql.find('\n')));
    throw DatabaseError(
        fmt::format("the batch-size database {} failed '{}': {}{}", path_, head, what,
                    sqlite3_errcode(db_) == SQLITE_BUSY ? " (another process held it too long: "
                                                          "is a server stuck on this file?)"
                                                        : ""));
  }

  // Switching a file to WAL needs it to itself, and SQLite answers "database is locked" at once,
  // without the busy handler, while another connection has it open in the middle of the same
  // switch (servers starting at once on a new database). WAL is kept in the file, so a database
  // already in it needs no switch; otherwise the switch is tried again until `lock_wait` is up.
  void enter_wal(std::chrono::milliseconds lock_wait) {
    const auto deadline = std::chrono::steady_clock::now() + lock_wait;
    for (;;) {
      std::string mode;
      char* error = nullptr;
      const int rc = sqlite3_exec(
          db_, "PRAGMA journal_mode=WAL",
          [](void* out, int, char** values, char**) {
            *static_cast<std::string*>(out) = values[0] != nullptr ? values[0] : "";
            return 0;
          },
          &mode, &error);
      const std::string what = error != nullptr ? error : sqlite3_errmsg(db_);
      sqlite3_free(error);
      if (rc == SQLITE_OK) {
        if (mode != "wal") {
          throw DatabaseError(fmt::format(
              "the batch-size database {} cannot use write-ahead logging (its journal mode "
              "stayed '{}'): is it on a network file system? Put it on a local disk",
              path_, mode));
        }
        return;
      }
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
        fail("PRAGMA journal_mode=WAL", what);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, sqlite3_stmt*> statements_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::filesystem::path& path,
                                         const StoreOptions& options) {
  const std::string file = path.string();
  return std::make_unique<SqlStore>(
      [file, options] { return std::make_unique<Connection>(file, options); }, "sqlite:///" + file,
      "", /*one_writer_at_a_time=*/true);
}

}  // namespace zeus::bso
