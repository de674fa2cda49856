// The one checker for POSIX calls: converts -1/errno into a typed zeus error naming the call and
// the path, so every failing system call reads the same way.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>

namespace zeus {

// strerror(errnum) as a string (thread-safe).
std::string errno_string(int errnum);

// Throws IoError (PermissionError for EACCES/EPERM) saying `what` failed on `path`.
[[noreturn]] void throw_posix_error(std::string_view what, std::string_view path, int errnum);

// Returns rc when rc != -1, else throws via throw_posix_error with the current errno.
template <typename T>
T check_posix(T rc, std::string_view what, std::string_view path) {
  if (rc == static_cast<T>(-1)) {
    throw_posix_error(what, path, errno);
  }
  return rc;
}

// The host name of this machine, for error messages and journals.
std::string host_name();

}  // namespace zeus
