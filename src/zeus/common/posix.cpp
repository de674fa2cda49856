#include "zeus/common/posix.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "zeus/common/errors.h"

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

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) {
    return "unknown-host";
  }
  return buf.data();
}

}  // namespace zeus
