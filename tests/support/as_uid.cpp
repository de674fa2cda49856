// Test helper: runs a program as another (unprivileged) user, the way a cluster job runs:
//   zeus_test_as_uid UID PROGRAM [ARGS...]
// Drops every group, then gid = uid, then the uid (root only), and execs PROGRAM. The uid need
// not exist in /etc/passwd: the kernel, NVML's permission check and zeusd's SO_PEERCRED see it.
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s UID PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  const auto id = static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10));
  if (::setgroups(0, nullptr) != 0 || ::setgid(id) != 0 || ::setuid(id) != 0) {
    std::fprintf(stderr, "as_uid: cannot become uid %u: %s\n", id, std::strerror(errno));
    return 2;
  }
  ::execv(argv[2], argv + 2);
  std::fprintf(stderr, "as_uid: cannot run %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
