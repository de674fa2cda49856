#include "zeus/common/posix.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

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

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

namespace {

// The fields of /proc/PID/stat after "(comm)", which may itself hold spaces and parentheses.
std::optional<std::vector<std::string>> stat_fields(int pid) {
  if (pid <= 0) {
    return std::nullopt;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) {
    return std::nullopt;
  }
  const size_t close = line.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) {
    fields.push_back(f);
  }
  return fields;
}

}  // namespace

std::optional<unsigned long long> process_start_ticks(int pid) {
  // After "(comm)": state is field 3, starttime field 22, so index 22 - 3 = 19.
  const auto fields = stat_fields(pid);
  if (!fields || fields->size() < 20) {
    return std::nullopt;
  }
  return parse_number<unsigned long long>((*fields)[19]);
}

std::optional<unsigned> process_uid(int pid) {
  struct stat st {};
  if (pid <= 0 || ::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0) {
    return std::nullopt;
  }
  return st.st_uid;
}

bool process_alive(int pid, std::optional<unsigned long long> start_ticks) {
  const auto fields = stat_fields(pid);
  if (!fields || fields->empty() || (*fields)[0] == "Z" || (*fields)[0] == "X") {
    return false;
  }
  return !start_ticks || process_start_ticks(pid) == start_ticks;
}

void write_all(int fd, std::string_view data, std::string_view what, std::string_view path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    check_posix(n, what, path);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void close_fd_range(unsigned first, unsigned last) {
  // The system call, not glibc's wrapper (2.34+): the wheel targets glibc 2.28.
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0U) == 0 || errno != ENOSYS) {
    return;
  }
#endif
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    return;
  }
  const int own = ::dirfd(dir);
  std::vector<int> fds;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const unsigned long fd = std::strtoul(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && static_cast<int>(fd) != own && fd >= first &&
        fd <= last) {
      fds.push_back(static_cast<int>(fd));
    }
  }
  ::closedir(dir);
  for (const int fd : fds) {
    ::close(fd);
  }
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) {
    return "unknown-host";
  }
  return buf.data();
}

}  // namespace zeus
