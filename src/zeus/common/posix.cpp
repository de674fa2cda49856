#include "zeus/common/posix.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "zeus/common/errors.h"

extern char** environ;

namespace zeus {

std::string errno_string(int errnum) {
  std::array<char, 256> buf{};
  // GNU strerror_r may return a static string instead of filling buf.
  const char* msg = strerror_r(errnum, buf.data(), buf.size());
  return msg;
}

void throw_posix_error(std::string_view what, std::string_view path, int errnum) {
  const std::string msg = fmt::format("{} '{}' failed: {}", what, path, errno_string(errnum));
  if (errnum == EACCES || errnum == EPERM) {
    throw PermissionError(msg + "; check the file's permissions or run with the needed rights");
  }
  throw IoError(msg);
}

ChildArgs::ChildArgs(std::vector<std::string> args,
                     const std::map<std::string, std::string>& env_overrides)
    : args_(std::move(args)) {
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    if (!env_overrides.contains(std::string(entry.substr(0, entry.find('='))))) {
      env_.emplace_back(entry);
    }
  }
  for (const auto& [name, value] : env_overrides) {
    env_.push_back(name + "=" + value);
  }
  for (auto& a : args_) {
    argv_.push_back(a.data());
  }
  argv_.push_back(nullptr);
  for (auto& e : env_) {
    envp_.push_back(e.data());
  }
  envp_.push_back(nullptr);
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) {
    return "unknown-host";
  }
  return buf.data();
}

}  // namespace zeus
