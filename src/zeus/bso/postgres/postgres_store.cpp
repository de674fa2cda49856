#include "zeus/bso/postgres/postgres_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "zeus/bso/sql_transaction.h"

namespace zeus::bso {

// Apart from sqlite_store.cpp's Row and Connection (the two meet in a unity build).
namespace postgres {
namespace {

// Upstream's tables and the version table change only under this lock (an arbitrary constant:
// "zeusbso" in ASCII), held to the end of the migration's transaction.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(31093520786977647)";

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

class Row final : public SqlRow {
 public:
  Row(const PGresult* r, int row) : r_(r), row_(row) {}
  bool null(int col) const override { return PQgetisnull(r_, row_, col) != 0; }
  int64_t i64(int col) const override { return std::strtoll(value(col), nullptr, 10); }
  // PostgreSQL writes infinities as "Infinity", which strtod reads.
  double f64(int col) const override { return std::strtod(value(col), nullptr); }
  bool boolean(int col) const override { return value(col)[0] == 't'; }
  std::string text(int col) const override {
    return std::string(value(col), static_cast<size_t>(PQgetlength(r_, row_, col)));
  }

 private:
  const char* value(int col) const { return PQgetvalue(r_, row_, col); }
  const PGresult* r_;
  int row_;
};

// The server for messages: host, port and database, never the password.
std::string describe(PGconn* c) {
  const char* host = PQhost(c);
  return fmt::format("postgresql://{}@{}:{}/{}", PQuser(c) != nullptr ? PQuser(c) : "",
                     host != nullptr ? host : "", PQport(c) != nullptr ? PQport(c) : "",
                     PQdb(c) != nullptr ? PQdb(c) : "");
}

class Connection final : public SqlSession {
 public:
  Connection(const std::string& conninfo, const StoreOptions& options) : c_(connect(conninfo)) {
    if (c_ == nullptr || PQstatus(c_) != CONNECTION_OK) {
      const std::string what = c_ != nullptr ? PQerrorMessage(c_) : "out of memory";
      const std::string where = c_ != nullptr ? describe(c_) : "PostgreSQL";
      PQfinish(c_);
      throw DatabaseError(fmt::format(
          "cannot connect to the batch-size database {}: {} (is the server up, and may this "
          "user connect to that database?)",
          where, trim(what)));
    }
    where_ = describe(c_);
    // Notices (CREATE ... IF NOT EXISTS skipping) are not news.
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
    // A transaction that holds a job's row too long (a stuck server) fails this one with a
    // message instead of hanging it.
    exec(fmt::format("SET lock_timeout = {}", options.lock_wait.count()));
  }
  ~Connection() override { PQfinish(c_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& where() const { return where_; }

  // libpq waits for an unreachable server as long as TCP does: 10 s unless the URL says.
  static PGconn* connect(const std::string& conninfo) {
    const char* keys[] = {"connect_timeout", "dbname", nullptr};
    const char* values[] = {"10", conninfo.c_str(), nullptr};
    return PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  }
  Dialect dialect() const override { return Dialect::kPostgres; }
  const char* begin_statement() const override { return "BEGIN"; }

  void exec(const std::string& sql) override {
    const Result r(PQexec(c_, sql.c_str()));
    check(r.get(), sql);
  }

  int64_t run(const char* sql, std::span<const SqlParam> params,
              const std::function<void(const SqlRow&)>& on_row) override {
    // Text parameters of unspecified type: the server infers each from its column, so one
    // statement text serves SQLite and PostgreSQL (enums, booleans as 0/1, timestamps).
    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* v = std::get_if<int64_t>(&params[i])) {
        texts[i] = std::to_string(*v);
      } else if (const auto* d = std::get_if<double>(&params[i])) {
        texts[i] = fmt::format("{}", *d);
      } else if (const auto* s = std::get_if<std::string>(&params[i])) {
        texts[i] = *s;
      } else {
        continue;  // NULL
      }
      values[i] = texts[i].c_str();
    }
    const Result r(PQexecParams(c_, sql, static_cast<int>(params.size()), nullptr, values.data(),
                                nullptr, nullptr, 0));
    check(r.get(), sql);
    if (on_row) {
      for (int row = 0; row < PQntuples(r.get()); ++row) {
        on_row(Row(r.get(), row));
      }
    }
    const char* changed = PQcmdTuples(r.get());
    return changed != nullptr && changed[0] != '\0' ? std::strtoll(changed, nullptr, 10) : 0;
  }

 private:
  static std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
      s.pop_back();
    }
    return s;
  }

  void check(const PGresult* r, std::string_view sql) const {
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      return;
    }
    const std::string head(sql.substr(0, sql.find('\n')));
    throw DatabaseError(fmt::format("the batch-size database {} failed '{}': {}", where_, head,
                                    trim(PQresultErrorMessage(r))));
  }

  PGconn* c_;
  std::string where_;
};

}  // namespace
}  // namespace postgres

std::unique_ptr<Store> open_postgres_store(const std::string& conninfo,
                                           const StoreOptions& options) {
  auto first = std::make_unique<postgres::Connection>(conninfo, options);
  const std::string where = first->where();
  auto pending = std::make_shared<std::unique_ptr<postgres::Connection>>(std::move(first));
  return std::make_unique<SqlStore>(
      [conninfo, options, pending]() -> std::unique_ptr<SqlSession> {
        if (*pending) {
          return std::move(*pending);  // the connection that named the server above
        }
        return std::make_unique<postgres::Connection>(conninfo, options);
      },
      where, postgres::kMigrationLock, /*one_writer_at_a_time=*/false);
}

}  // namespace zeus::bso
