// open_store: the database URL, in SQLAlchemy's forms as upstream takes them, to a backend.
#include <fmt/format.h>

#include "zeus/bso/postgres/postgres_store.h"
#include "zeus/bso/sqlite/sqlite_store.h"
#include "zeus/bso/store.h"

namespace zeus::bso {

namespace {

constexpr const char* kSupported =
    "supported: sqlite:///relative/path.db, sqlite:////absolute/path.db (also "
    "sqlite+aiosqlite://), postgresql://user[:password]@host[:port]/database (also "
    "postgresql+asyncpg:// and postgres://)";

}  // namespace

std::unique_ptr<Store> open_store(const std::string& url, const StoreOptions& options) {
  const auto colon = url.find("://");
  if (colon == std::string::npos) {
    throw ConfigError(fmt::format("the database URL '{}' has no scheme; {}", url, kSupported));
  }
  const std::string scheme = url.substr(0, colon);
  const std::string dialect = scheme.substr(0, scheme.find('+'));
  const std::string rest = url.substr(colon + 3);
  if (dialect == "sqlite") {
    // SQLAlchemy: sqlite:///rel.db is relative, sqlite:////abs.db absolute; nothing after the
    // slashes (an in-memory database) would lose every job at exit.
    if (rest.empty() || rest[0] != '/' || rest.size() == 1) {
      throw ConfigError(fmt::format(
          "the database URL '{}' names no file (an in-memory database loses every job when the "
          "server stops); {}",
          url, kSupported));
    }
    std::string path = rest.substr(1);
    if (const auto q = path.find('?'); q != std::string::npos) {
      path.resize(q);  // SQLAlchemy's query options (?mode=...) do not apply here
    }
    return open_sqlite_store(path, options);
  }
  if (dialect == "postgresql" || dialect == "postgres") {
    // libpq takes the URL itself once the driver is gone.
    return open_postgres_store("postgresql://" + rest, options);
  }
  if (dialect == "mysql" || dialect == "mariadb") {
    throw ConfigError(fmt::format(
        "the database URL '{}' is MySQL, which zeus bso-server does not support (upstream's "
        "default); use SQLite for one machine or PostgreSQL for a cluster: {}",
        url, kSupported));
  }
  throw ConfigError(fmt::format("the database URL '{}' has the unknown scheme '{}'; {}", url,
                                scheme, kSupported));
}

}  // namespace zeus::bso
