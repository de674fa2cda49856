// The batch-size service's tests: a real PostgreSQL 15 started for the test on a free loopback
// port, `zeus bso-server` processes, and a small HTTP client (libcurl).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/test_support.h"

namespace zeus::test {

// initdb into a temporary directory and `postgres` on 127.0.0.1:<free port> (as the 'postgres'
// or 'nobody' user when this process is root, since PostgreSQL refuses to run as root); stopped
// (fast shutdown) and removed when destroyed.
class PostgresServer {
 public:
  // The server, or std::nullopt with `why_not` saying why it cannot start here.
  static std::unique_ptr<PostgresServer> start(std::string& why_not);
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // postgresql://USER@127.0.0.1:PORT/DB for a database made for the caller (createdb).
  std::string create_database(const std::string& name);
  int port() const { return port_; }

 private:
  PostgresServer() = default;
  std::unique_ptr<TempDir> dir_;
  std::string user_;
  std::optional<unsigned> uid_;  // run as this uid (when root)
  int port_ = 0;
  std::unique_ptr<Child> postgres_;
};

// `zeus bso-server --port 0 --database URL [flags]`, ready when constructed.
class BsoServerProcess {
 public:
  BsoServerProcess(const std::string& database_url, std::vector<std::string> flags = {});
  ~BsoServerProcess();
  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
  int pid() const { return child_->pid(); }
  // SIGKILL and reap.
  void kill9();

 private:
  std::string url_;
  std::unique_ptr<Child> child_;
};

// A JobSpecFromClient body with upstream's defaults for what is not given.
std::string job_spec(const std::string& job_id, const std::vector<int>& batch_sizes,
                     int default_batch_size, const std::string& extra_fields = "");

}  // namespace zeus::test
