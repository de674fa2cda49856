#include "bso_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <csignal>
#include <regex>

namespace zeus::test {

namespace fs = std::filesystem;

namespace {

std::optional<fs::path> postgres_bin() {
  for (const char* v : {"15", "16", "17", "14", "13"}) {
    const fs::path bin = fs::path("/usr/lib/postgresql") / v / "bin";
    if (fs::exists(bin / "postgres") && fs::exists(bin / "initdb")) {
      return bin;
    }
  }
  return std::nullopt;
}

// Runs argv (as `uid` when given) and says what failed, or "".
std::string run_as(const std::optional<unsigned>& uid, std::vector<std::string> argv) {
  if (uid) {
    argv.insert(argv.begin(), {ZEUS_AS_UID_PATH, std::to_string(*uid)});
  }
  const ProcessResult r = run_process(argv, std::chrono::seconds(120));
  if (r.exit_code == 0) {
    return "";
  }
  return fmt::format("{} exited {}: {}{}", argv[uid ? 2 : 0], r.exit_code, r.out, r.err);
}

}  // namespace

std::unique_ptr<PostgresServer> PostgresServer::start(std::string& why_not) {
  const auto bin = postgres_bin();
  if (!bin) {
    why_not = "PostgreSQL's server is not installed (Debian: postgresql-15)";
    return nullptr;
  }
  std::unique_ptr<PostgresServer> s(new PostgresServer);
  s->dir_ = std::make_unique<TempDir>();
  if (::geteuid() == 0) {
    // PostgreSQL refuses to run as root: become its own user, or nobody.
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      pw = ::getpwnam("nobody");
    }
    if (pw == nullptr) {
      why_not = "running as root and neither a 'postgres' nor a 'nobody' user exists";
      return nullptr;
    }
    s->uid_ = pw->pw_uid;
    s->user_ = pw->pw_name;
    fs::permissions(s->dir_->path(), fs::perms::all, fs::perm_options::add);
  } else {
    const passwd* pw = ::getpwuid(::geteuid());
    s->user_ = pw != nullptr ? pw->pw_name : "postgres";
  }
  const fs::path data = s->dir_->path() / "data";
  fs::create_directories(data);
  if (s->uid_) {
    if (::chown(data.c_str(), *s->uid_, *s->uid_) != 0) {
      why_not = "cannot hand the data directory to " + s->user_;
      return nullptr;
    }
  }
  if (auto e = run_as(s->uid_, {(*bin / "initdb").string(), "-D", data.string(), "-U", s->user_,
                                "--auth=trust", "-E", "UTF8", "--no-sync"});
      !e.empty()) {
    why_not = "initdb failed: " + e;
    return nullptr;
  }
  s->port_ = free_port();
  std::vector<std::string> argv{(*bin / "postgres").string(),
                                "-D",
                                data.string(),
                                "-p",
                                std::to_string(s->port_),
                                "-c",
                                "listen_addresses=127.0.0.1",
                                "-c",
                                "unix_socket_directories=" + data.string(),
                                "-c",
                                "fsync=off",
                                "-c",
                                "log_min_messages=panic",
                                "-c",
                                "max_connections=200"};
  if (s->uid_) {
    argv.insert(argv.begin(), {ZEUS_AS_UID_PATH, std::to_string(*s->uid_)});
  }
  s->postgres_ = std::make_unique<Child>(argv);
  const std::string ping =
      fmt::format("host=127.0.0.1 port={} user={} dbname=postgres", s->port_, s->user_);
  if (!eventually([&] { return PQping(ping.c_str()) == PQPING_OK; }, std::chrono::seconds(30))) {
    why_not = fmt::format("postgres did not accept connections on 127.0.0.1:{} in 30 s", s->port_);
    return nullptr;
  }
  return s;
}

PostgresServer::~PostgresServer() {
  if (postgres_) {
    postgres_->kill(SIGINT);  // fast shutdown: backends end, the postmaster exits
    postgres_->wait();
  }
}

std::string PostgresServer::create_database(const std::string& name) {
  const std::string conninfo =
      fmt::format("host=127.0.0.1 port={} user={} dbname=postgres", port_, user_);
  PGconn* c = PQconnectdb(conninfo.c_str());
  PGresult* r = PQexec(c, fmt::format("CREATE DATABASE \"{}\"", name).c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string error = PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  if (!ok) {
    throw std::runtime_error("CREATE DATABASE failed: " + error);
  }
  return fmt::format("postgresql://{}@127.0.0.1:{}/{}", user_, port_, name);
}

BsoServerProcess::BsoServerProcess(const std::string& database_url,
                                   std::vector<std::string> flags) {
  std::vector<std::string> argv{ZEUS_CLI_PATH, "bso-server", "--port",
                                "0",           "--database", database_url};
  argv.insert(argv.end(), flags.begin(), flags.end());
  child_ = std::make_unique<Child>(argv);
  if (!child_->wait_for_output("(database", std::chrono::seconds(60))) {
    throw std::runtime_error("zeus bso-server did not start: " + child_->wait().out);
  }
  // The first line names the address: "... on http://127.0.0.1:PORT (database ...)".
  std::smatch m;
  const std::string out = child_->output();
  if (!std::regex_search(out, m, std::regex(R"(http://127\.0\.0\.1:[0-9]+)"))) {
    throw std::runtime_error("zeus bso-server printed no address: " + out);
  }
  url_ = m.str();
}

BsoServerProcess::~BsoServerProcess() {
  if (child_) {
    child_->kill(SIGTERM);
    child_->wait();
  }
}

void BsoServerProcess::kill9() {
  child_->kill(SIGKILL);
  child_->wait();
  child_.reset();
}

std::string job_spec(const std::string& job_id, const std::vector<int>& batch_sizes,
                     int default_batch_size, const std::string& extra_fields) {
  return fmt::format(R"({{{}"job_id_prefix":"{}","batch_sizes":[{}],"default_batch_size":{},)"
                     R"("max_power":300,"number_of_gpus":1,"gpu_model":"A40"{}}})",
                     job_id.empty() ? "" : fmt::format(R"("job_id":"{}",)", job_id),
                     job_id.empty() ? "job" : job_id.substr(0, job_id.find('-')),
                     fmt::join(batch_sizes, ","), default_batch_size,
                     extra_fields.empty() ? "" : "," + extra_fields);
}

}  // namespace zeus::test
