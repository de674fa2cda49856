// What the two SQL backends have in common, below the Store: a connection that runs one
// statement with parameters and hands back its rows. The tables, statements and the mapping of
// rows to Jobs are written once above it (sql_transaction.h); sqlite/ and postgres/ only connect,
// bind and read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "zeus/bso/schema.h"

namespace zeus::bso {

// A statement parameter. Booleans go as 0/1 (both databases read those into BOOLEAN).
using SqlParam = std::variant<std::monostate, int64_t, double, std::string>;

inline SqlParam sql_param(int64_t v) {
  return v;
}
inline SqlParam sql_param(bool v) {
  return int64_t{v ? 1 : 0};
}
inline SqlParam sql_param(double v) {
  return v;
}
inline SqlParam sql_param(std::string v) {
  return v;
}
inline SqlParam sql_param(std::string_view v) {
  return std::string(v);
}
template <typename T>
SqlParam sql_param(const std::optional<T>& v) {
  return v ? sql_param(*v) : SqlParam{};
}

// One result row; columns count from 0.
class SqlRow {
 public:
  virtual ~SqlRow() = default;
  virtual bool null(int col) const = 0;
  virtual int64_t i64(int col) const = 0;
  virtual double f64(int col) const = 0;
  virtual bool boolean(int col) const = 0;
  virtual std::string text(int col) const = 0;

  std::optional<double> opt_f64(int col) const {
    return null(col) ? std::nullopt : std::optional(f64(col));
  }
  std::optional<int64_t> opt_i64(int col) const {
    return null(col) ? std::nullopt : std::optional(i64(col));
  }
  std::optional<std::string> opt_text(int col) const {
    return null(col) ? std::nullopt : std::optional(text(col));
  }
};

// One connection, used by one thread at a time. Statements use $1, $2, ... each once, in order
// (PostgreSQL's placeholders, which SQLite reads as named parameters in that order). Failures
// throw DatabaseError naming the database and the statement's first line.
class SqlSession {
 public:
  virtual ~SqlSession() = default;
  virtual Dialect dialect() const = 0;
  // A statement without parameters or rows (BEGIN, COMMIT, DDL).
  virtual void exec(const std::string& sql) = 0;
  // `sql` is a string literal (backends may cache its prepared form by address). Calls on_row
  // for each row; returns the number of rows it changed.
  virtual int64_t run(const char* sql, std::span<const SqlParam> params,
                      const std::function<void(const SqlRow&)>& on_row = {}) = 0;
  // The statement that starts a transaction that will write (SQLite: BEGIN IMMEDIATE).
  virtual const char* begin_statement() const = 0;
};

}  // namespace zeus::bso
