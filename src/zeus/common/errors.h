// The exception tree for every error a user or the environment can cause, and ZEUS_ASSERT for
// broken invariants. Library code throws; only `main` maps errors to exit codes.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace zeus {

// Base of every zeus-cpp error. The message names what failed, where, and what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad option, flag, environment variable or input file content.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A device (GPU, CPU energy counter) failed or refused an operation.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// The operation needs privileges this process lacks (root / CAP_SYS_ADMIN, readable sysfs).
class PermissionError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// The backend or device lacks the capability (check with the matching `has_...()` query).
class NotSupported : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// The GPU fell off the bus or stopped answering; readings after this point are missing.
class DeviceLost : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// Distributed runtime errors.
class DistError : public Error {
 public:
  using Error::Error;
};
class StoreError : public DistError {
 public:
  using DistError::DistError;
};
class TimeoutError : public DistError {
 public:
  using DistError::DistError;
};
class PeerFailed : public DistError {
 public:
  using DistError::DistError;
};
// A peer failed authentication: no token where one is required, a wrong one, a replay.
class AuthError : public DistError {
 public:
  using DistError::DistError;
};

// A file could not be read, written or parsed.
class IoError : public Error {
 public:
  using Error::Error;
};

// Thrown by ZEUS_ASSERT: a bug in zeus-cpp, not something the user can fix.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_assert(const char* expr, const char* file, int line,
                               const std::string& msg);
}  // namespace detail

}  // namespace zeus

// Checks an invariant; on failure throws InternalError saying it is a bug, with the message.
#define ZEUS_ASSERT(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      ::zeus::detail::throw_assert(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                                      \
  } while (false)

// Checks a == b; the message shows both values.
#define ZEUS_ASSERT_EQ(a, b) ZEUS_ASSERT((a) == (b), "{} != {}", (a), (b))
