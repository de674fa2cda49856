#include "zeus/process/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <utility>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/process/watch.h"

extern char** environ;

namespace zeus::process {
namespace {

using Clock = std::chrono::steady_clock;

// The argument and environment arrays of a child (execve), owning their strings, built before
// the fork: this process's environment with `env_overrides` added or replacing variables.
class ChildArgs {
 public:
  ChildArgs(std::vector<std::string> args, const std::map<std::string, std::string>& env_overrides);
  ChildArgs(const ChildArgs&) = delete;
  ChildArgs& operator=(const ChildArgs&) = delete;
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

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

// Descriptors the child moves into place, prepared before the fork.
struct FdPlan {
  std::vector<std::pair<int, int>> moves;  // (target, source): dup2(source, target) in the child
  UniqueFd dev_null;
  // Where the child parks each source first: allocated here, written in the child (a fork's
  // copy), so that nothing is allocated between fork and exec.
  mutable std::vector<int> parked;
};

FdPlan plan_fds(const ChildSpec& spec) {
  FdPlan plan;
  const std::array<std::pair<int, const ChildFd*>, 3> standard{{{STDIN_FILENO, &spec.stdin_fd},
                                                                {STDOUT_FILENO, &spec.stdout_fd},
                                                                {STDERR_FILENO, &spec.stderr_fd}}};
  for (const auto& [target, fd] : standard) {
    if (fd->kind == ChildFd::Kind::kParentFd) {
      plan.moves.emplace_back(target, fd->fd);
    } else if (fd->kind == ChildFd::Kind::kDevNull) {
      if (plan.dev_null.get() < 0) {
        plan.dev_null =
            UniqueFd(check_posix(::open("/dev/null", O_RDWR | O_CLOEXEC), "open", "/dev/null"));
      }
      plan.moves.emplace_back(target, plan.dev_null.get());
    }
  }
  for (const auto& [target, source] : spec.extra_fds) {
    plan.moves.emplace_back(target, source);
  }
  plan.parked.resize(plan.moves.size());
  return plan;
}

// The executable argv[0] names: itself when it holds a '/' (or PATH is not searched), else the
// first executable in PATH.
std::string resolve_program(const ChildSpec& spec) {
  if (!spec.program.empty()) {
    return spec.program;
  }
  const std::string& name = spec.argv.at(0);
  if (!spec.search_path || name.find('/') != std::string::npos) {
    return name;
  }
  std::string found = find_in_path(name);
  if (found.empty()) {
    throw ConfigError(fmt::format("cannot execute '{}' ({}): not found in PATH ({}); give its path",
                                  name, spec.what, get_env_or_default(kEnvPath)));
  }
  return found;
}

// What the child does between fork and exec (or the function): async-signal-safe calls only.
// Returns 0, or the errno of the step that failed.
int prepare_child(const ChildSpec& spec, const FdPlan& fds, pid_t parent) {
  if (spec.new_session) {
    if (::setsid() < 0)
      return errno;
  } else if (spec.own_group && ::setpgid(0, 0) < 0) {
    return errno;
  }
  if (spec.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, spec.parent_death_signal) < 0)
      return errno;
    if (::getppid() != parent) {
      ::_exit(128 + spec.parent_death_signal);  // the parent died before prctl took effect
    }
  }
  // Sources first out of the way of every target, so that one move cannot clobber another's
  // source (dup2 onto itself would also keep close-on-exec).
  constexpr int kHighFd = 512;
  for (size_t i = 0; i < fds.moves.size(); ++i) {
    fds.parked[i] = ::fcntl(fds.moves[i].second, F_DUPFD_CLOEXEC, kHighFd);
    if (fds.parked[i] < 0)
      return errno;
  }
  for (size_t i = 0; i < fds.moves.size(); ++i) {
    if (::dup2(fds.parked[i], fds.moves[i].first) < 0)
      return errno;
  }
  ::signal(SIGPIPE, SIG_DFL);  // the parent may ignore it; the program expects the default
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  return 0;
}

[[noreturn]] void report_and_exit(int report_fd, int err) {
  [[maybe_unused]] ssize_t w = ::write(report_fd, &err, sizeof(err));
  ::_exit(127);
}

// The parent's half after fork: the child's own group on our side too (a signal sent before the
// child ran setpgid must reach it), and its pidfd.
void adopt(pid_t pid, const ChildSpec& spec, bool& own_group, UniqueFd& pidfd) {
  own_group = spec.own_group || spec.new_session;
  if (spec.own_group && !spec.new_session) {
    ::setpgid(pid, pid);  // EACCES once it executed: it had done it itself by then
  }
  try {
    pidfd = open_pidfd(pid);
  } catch (const Error&) {
    // An unreaped child cannot vanish; without a pidfd the owner polls try_wait().
  }
}

std::optional<ExitStatus> reap(pid_t pid, int options) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | options) != 0) {
    if (errno != EINTR) {
      throw InternalError(fmt::format("waitid for child {}: {}", pid, errno_string(errno)));
    }
  }
  if (info.si_pid == 0) {
    return std::nullopt;  // WNOHANG, still running
  }
  ExitStatus status;
  if (info.si_code == CLD_EXITED) {
    status.exit_code = info.si_status;
  } else {
    status.signal = info.si_status;
    status.exit_code = 128 + status.signal;
  }
  return status;
}

}  // namespace

std::string find_in_path(const std::string& program) {
  auto executable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    return executable(program) ? program : std::string();
  }
  std::istringstream dirs(get_env_or_default(kEnvPath));
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::filesystem::path candidate =
        std::filesystem::path(dir.empty() ? "." : dir) / program;
    if (executable(candidate)) {
      return candidate.string();
    }
  }
  return "";
}

std::string signal_name(int sig) {
  // Not sigabbrev_np (glibc 2.32+): the wheel targets glibc 2.28.
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},   {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},   {SIGCHLD, "SIGCHLD"},
      {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},   {SIGTTIN, "SIGTTIN"},
      {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
      {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
      {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
  };
  for (const auto& [number, name] : kNames) {
    if (number == sig) {
      return name;
    }
  }
  return fmt::format("signal {}", sig);
}

std::string ExitStatus::describe() const {
  if (signal != 0) {
    return fmt::format("was killed by signal {} ({})", signal, signal_name(signal));
  }
  return fmt::format("exited with code {}", exit_code);
}

Child Child::start(const ChildSpec& spec) {
  if (spec.argv.empty()) {
    throw ConfigError(fmt::format("no program to run for {}", spec.what));
  }
  const std::string program = resolve_program(spec);
  const ChildArgs args(spec.argv, spec.env_overrides);
  const FdPlan fds = plan_fds(spec);
  int report[2];
  check_posix(::pipe2(report, O_CLOEXEC), "create a pipe", spec.what);
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw_posix_error("start a process", spec.what, errno);
  }
  if (pid == 0) {
    if (const int err = prepare_child(spec, fds, parent); err != 0) {
      report_and_exit(report_write.get(), err);
    }
    ::execve(program.c_str(), args.argv(), args.envp());
    report_and_exit(report_write.get(), errno);
  }
  Child child;
  child.pid_ = pid;
  adopt(pid, spec, child.own_group_, child.pidfd_);
  report_write.reset();
  int err = 0;
  ssize_t n = 0;
  while ((n = ::read(report_read.get(), &err, sizeof(err))) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof(err))) {
    child.wait();
    throw ConfigError(
        fmt::format("cannot execute '{}' ({}): {}", program, spec.what, errno_string(err)));
  }
  return child;
}

Child Child::fork_function(const ChildSpec& spec, const std::function<int()>& body) {
  const FdPlan fds = plan_fds(spec);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw_posix_error("start a process", spec.what, errno);
  }
  if (pid == 0) {
    if (prepare_child(spec, fds, parent) != 0) {
      ::_exit(127);
    }
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 1;  // nothing of the parent's stack may run in the child
    }
    ::_exit(code);
  }
  Child child;
  child.pid_ = pid;
  adopt(pid, spec, child.own_group_, child.pidfd_);
  return child;
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      own_group_(other.own_group_),
      pidfd_(std::move(other.pidfd_)),
      status_(std::exchange(other.status_, std::nullopt)) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    own_group_ = other.own_group_;
    pidfd_ = std::move(other.pidfd_);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

Child::~Child() {
  release();
}

void Child::release() noexcept {
  if (running()) {
    signal(SIGKILL);
    try {
      wait();
    } catch (const Error&) {
      // Reaped elsewhere (a bug of the caller's): nothing is left to wait for.
    }
  }
  pid_ = -1;
  status_.reset();
  pidfd_.reset();
}

void Child::detach() noexcept {
  pid_ = -1;
  status_.reset();
  pidfd_.reset();
}

std::optional<ExitStatus> Child::try_wait() {
  if (!running()) {
    return status_;
  }
  status_ = reap(pid_, WNOHANG);
  return status_;
}

ExitStatus Child::wait() {
  if (!running()) {
    return status_.value_or(ExitStatus{});
  }
  status_ = reap(pid_, 0);
  return *status_;
}

std::optional<ExitStatus> Child::wait_for(std::chrono::nanoseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (running()) {
    if (try_wait()) {
      break;
    }
    const auto left = deadline - Clock::now();
    if (left <= std::chrono::nanoseconds(0)) {
      return std::nullopt;
    }
    wait_readable(pidfd_.get(), left);
  }
  return status_;
}

void Child::signal(int sig) {
  if (pid_ <= 0) {
    return;
  }
  if (own_group_) {
    ::kill(-pid_, sig);  // ESRCH: the group is gone
  } else if (running()) {
    ::kill(pid_, sig);  // unreaped, so the pid is still ours
  }
}

ExitStatus Child::stop(std::chrono::nanoseconds grace, int sig) {
  if (running()) {
    signal(sig);
    if (!wait_for(grace)) {
      signal(SIGKILL);
    }
  }
  const ExitStatus status = wait();
  if (own_group_) {
    ::kill(-pid_, SIGKILL);  // what it left behind in its group does not outlive it
  }
  return status;
}

}  // namespace zeus::process
