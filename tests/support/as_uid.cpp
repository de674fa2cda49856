// Test helper: runs a program as another (unprivileged) user, the way a cluster job runs:
//   zeus_test_as_uid UID PROGRAM [ARGS...]
// Drops every group, then gid = uid, then the uid (root only), and execs PROGRAM; with
// ZEUS_TEST_DIE_WITH_PARENT=1 it dies with its parent (PR_SET_PDEATHSIG, SIGKILL). The uid need
// not exist in /etc/passwd: the kernel, NVML's permission check and zeusd's SO_PEERCRED see it.
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
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
  // The kernel clears a parent-death signal when the uid changes; a client that must die with its
  // launcher (unshare --kill-child: a pod's first process) asks for it again.
  if (const char* die = std::getenv("ZEUS_TEST_DIE_WITH_PARENT"); die != nullptr && *die == '1') {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  ::execv(argv[2], argv + 2);
  std::fprintf(stderr, "as_uid: cannot run %s: %s\n", argv[2], std::strerror(errno));
  return 127;
}
