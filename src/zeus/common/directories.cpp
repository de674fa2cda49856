#include "zeus/common/directories.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "zeus/common/errors.h"

namespace zeus {
namespace {

namespace fs = std::filesystem;

// The deepest part of `dir` that exists (`dir` itself when it does); "." when none does.
fs::path existing_ancestor(const fs::path& dir) {
  fs::path at = dir;
  std::error_code ec;
  while (!at.empty() && !fs::exists(fs::symlink_status(at, ec)) && at != at.root_path()) {
    at = at.parent_path();
  }
  return at.empty() ? fs::path(".") : at;
}

// Why files cannot be made under `dir`, from its deepest existing part; empty when nothing is
// in the way that can be seen before trying.
std::string obstacle(const fs::path& dir) {
  const fs::path at = existing_ancestor(dir);
  std::error_code ec;
  if (!fs::is_directory(at, ec)) {
    return fmt::format("'{}' is a file, not a directory", at.string());
  }
  if (::access(at.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    if (err == EROFS) {
      return fmt::format("'{}' is on a read-only file system", at.string());
    }
    if (err == EACCES || err == EPERM) {
      return fmt::format("'{}' is not writable by this user (uid {})", at.string(), ::geteuid());
    }
    return fmt::format("'{}': {}", at.string(), std::strerror(err));
  }
  return {};
}

[[noreturn]] void fail(const fs::path& dir, std::string_view what, const std::string& cause) {
  std::string where = fmt::format("'{}'", dir.string());
  if (dir.is_relative()) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(dir, ec);
    if (!ec) {
      where += fmt::format(" ({})", absolute.string());
    }
  }
  throw IoError(fmt::format("cannot use {} as the {}: {}; give a directory this user can write",
                            where, what, cause));
}

// mkdir -p with `mode` for every level it makes (std::filesystem's takes no mode).
void make_levels(const fs::path& dir, unsigned mode, std::error_code& ec) {
  fs::path level;
  for (const auto& part : dir) {
    level /= part;
    if (::mkdir(level.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
      return;
    }
  }
}

}  // namespace

void make_directory(const fs::path& dir, std::string_view what, unsigned mode) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    ec.clear();
    make_levels(dir, mode, ec);
    if (ec && !fs::is_directory(dir)) {
      const std::string cause = obstacle(dir);
      fail(dir, what, cause.empty() ? ec.message() : cause);
    }
  }
  if (std::string cause = obstacle(dir); !cause.empty()) {
    fail(dir, what, cause);
  }
}

fs::path directory_of(const fs::path& path) {
  fs::path dir = path.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

}  // namespace zeus
