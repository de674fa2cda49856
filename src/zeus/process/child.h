// Note [process supervision]: the one place zeus-cpp starts, signals, stops and reaps processes
// (a test holds src/, apps/ and python/ext to that: tests/process_test.cpp). Its rules:
//   - a child is started from a spec (argv, environment, descriptors, process group, parent-death
//     signal); everything the child runs between fork and exec is async-signal-safe (the
//     strings are built before the fork), so a multi-threaded parent may start children too;
//   - start() returns once the child has executed its program: a program that cannot be executed
//     is a ConfigError from start() naming it and the child, not an exit code 127 to decode;
//   - with a parent-death signal, the child checks after prctl() that its parent is still the
//     one that forked it (the parent may have died in between); the signal is sent when the
//     *thread* that started the child ends, so start such children from a long-lived thread;
//   - a child is reaped by its own pid only (waitid(P_PID)), never by waitpid(-1): one owner's
//     reaping cannot take another's child;
//   - stop() is SIGTERM (to the group, reaching what the child started), a grace period, then
//     SIGKILL; a Child destroyed while running is killed and reaped: no zombie, no orphan;
//   - exit_fd() is a pidfd where the kernel has them (Linux 5.3+): poll() it with the other
//     descriptors and the exit is seen the moment it happens; without pidfds it is -1 and the
//     owner polls try_wait() on SIGCHLD.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/posix.h"

namespace zeus::process {

// How a process ended.
struct ExitStatus {
  int exit_code = 0;  // when it exited; 128 + signal when a signal killed it
  int signal = 0;     // the signal that killed it, 0 when it exited

  bool ok() const { return exit_code == 0 && signal == 0; }
  // "exited with code 3" / "was killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

// "SIGTERM", or "signal 70" for a number without a name.
std::string signal_name(int sig);

// The path execvp would run for `program` (a PATH search when it has no '/'); empty when none is
// an executable regular file.
std::string find_in_path(const std::string& program);

// A descriptor the child gets: one of the parent's, /dev/null, or the parent's own (inherited).
struct ChildFd {
  enum class Kind { kInherit, kDevNull, kParentFd };
  Kind kind = Kind::kInherit;
  int fd = -1;  // for kParentFd

  static ChildFd inherit() { return {}; }
  static ChildFd dev_null() { return {Kind::kDevNull, -1}; }
  static ChildFd from(int parent_fd) { return {Kind::kParentFd, parent_fd}; }
};

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH (search_path)
  bool search_path = false;
  std::string program;  // the file executed when it is not argv[0] (such as /proc/self/exe)
  // Added to (or replacing in) this process's environment.
  std::map<std::string, std::string> env_overrides;
  // A process group of its own (pgid = pid), so that signal() and stop() reach what it starts.
  bool own_group = true;
  // A session of its own (a terminal's Ctrl-C does not reach it); implies its own group.
  bool new_session = false;
  int parent_death_signal = 0;  // PR_SET_PDEATHSIG; 0 for none
  ChildFd stdin_fd, stdout_fd, stderr_fd;
  // Descriptors of the parent the child keeps at these numbers (dup2); all others it did not
  // inherit by default are closed on exec as usual.
  std::map<int, int> extra_fds;  // child fd -> parent fd
  std::string what;              // names the child in errors: "rank 3", "the training command"
};

class Child {
 public:
  // Starts the child and returns once it executed argv[0]. Throws ConfigError naming spec.what
  // and argv[0] when it cannot be executed (no such file, not executable), IoError when the
  // process cannot be created.
  [[nodiscard]] static Child start(const ChildSpec& spec);

  // Forks a child that runs `body` and exits with what it returns (no exec): for helpers of
  // zeus-cpp's own, such as the launcher's sentinel. Only from a single-threaded process (the
  // child runs ordinary code); argv and the environment of the spec are ignored.
  [[nodiscard]] static Child fork_function(const ChildSpec& spec, const std::function<int()>& body);

  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // A child still running is killed (SIGKILL, its group too) and reaped.
  ~Child();

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  bool running() const { return pid_ > 0 && !status_; }
  // Readable once the child has exited (a pidfd); -1 where the kernel has no pidfds.
  int exit_fd() const { return pidfd_.get(); }
  // Its exit once reaped.
  const std::optional<ExitStatus>& status() const { return status_; }

  // Reaps the child if it has exited; its status, or std::nullopt while it runs.
  [[nodiscard]] std::optional<ExitStatus> try_wait();
  // Blocks until it exits.
  ExitStatus wait();
  // Waits up to `timeout`; std::nullopt when it still runs.
  [[nodiscard]] std::optional<ExitStatus> wait_for(std::chrono::nanoseconds timeout);

  // Sends `sig` to the child's group (what it started too) when it has one, else to the child.
  // Once the child is reaped, only its group (which may outlive it) can still be signalled.
  void signal(int sig);
  // SIGTERM (or `sig`), up to `grace` for it to exit, then SIGKILL to the group; reaped.
  ExitStatus stop(std::chrono::nanoseconds grace, int sig = 15 /* SIGTERM */);
  // Stops owning the child: it is neither killed nor reaped by this object (a process left to
  // run on purpose; init reaps it once we are gone).
  void detach() noexcept;

 private:
  void release() noexcept;

  pid_t pid_ = -1;
  bool own_group_ = false;
  UniqueFd pidfd_;
  std::optional<ExitStatus> status_;
};

}  // namespace zeus::process
