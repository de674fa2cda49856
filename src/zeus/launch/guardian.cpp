#include "zeus/launch/guardian.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <optional>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/device/restore_rule.h"
#include "zeus/launch/supervisor.h"
#include "zeus/process/watch.h"

namespace zeus::launch {
namespace {

using Clock = std::chrono::steady_clock;

bool group_gone(pid_t pgid) {
  return ::kill(-pgid, 0) != 0 && errno == ESRCH;
}

// Waits until every group is gone or `deadline`; true when all are.
bool wait_gone(const std::vector<pid_t>& groups, Clock::time_point deadline) {
  while (true) {
    bool all = true;
    for (pid_t g : groups) {
      all = all && group_gone(g);
    }
    if (all) {
      return true;
    }
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ignore_stop_signals() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    ::sigaction(sig, &ignore, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

enum class Ending { kReleased, kOwnerDied };

// The launcher's pipe: the groups it names, until "D" (released) or end of file (it died).
Ending watch_pipe(int fd, std::vector<pid_t>& groups) {
  std::string buffer;
  char chunk[512];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return Ending::kOwnerDied;  // the launcher is gone (or its pipe broke)
    }
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      const std::string line = buffer.substr(0, nl);
      if (line == "D") {
        return Ending::kReleased;
      }
      if (line.rfind("G", 0) == 0) {
        groups.clear();
        for (const auto& word : split(line.substr(1), ' ')) {
          if (const auto pgid = parse_number<pid_t>(word); pgid && *pgid > 0) {
            groups.push_back(*pgid);
          }
        }
      }
    }
  }
}

// A process: until it ends (died) or says "D" on our stdin (released). Prints "ready" once
// it watches. Forks of the process may hold stdin after it ends: then only the pid counts.
Ending watch_pid(pid_t pid) {
  std::optional<process::ProcessWatch> watch;
  try {
    watch.emplace(pid);
  } catch (const ConfigError&) {
    return Ending::kOwnerDied;  // gone before we looked
  }
  const char ready[] = "ready\n";
  [[maybe_unused]] const ssize_t w = ::write(STDOUT_FILENO, ready, sizeof(ready) - 1);
  bool stdin_open = true;
  while (watch->alive()) {
    std::vector<pollfd> fds;
    if (watch->fd() >= 0) {
      fds.push_back({watch->fd(), POLLIN, 0});
    }
    if (stdin_open) {
      fds.push_back({STDIN_FILENO, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), watch->fd() >= 0 ? -1 : 50);
    for (const auto& p : fds) {
      if (p.fd == STDIN_FILENO && (p.revents & (POLLIN | POLLHUP)) != 0) {
        char buf[64];
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n > 0 &&
            std::string_view(buf, static_cast<size_t>(n)).find('D') != std::string_view::npos) {
          return Ending::kReleased;
        }
        if (n <= 0) {
          stdin_open = false;
        }
      }
    }
  }
  return Ending::kOwnerDied;
}

// One pass over what the guardian restores; returns how many journals a retry may still
// restore.
int restore_once(const GuardianOptions& o, const std::function<void(const std::string&)>& say) {
  int left = o.journal_dirs.empty() ? 0 : settle_journals(o.journal_dirs, say);
  for (const auto& journal : o.journals) {
    if (std::error_code ec; !std::filesystem::exists(journal, ec)) {
      continue;
    }
    try {
      const auto report = device::restore_from_journal(journal);
      for (const auto& line : report.lines) {
        say(fmt::format("process {} ended without restoring: {}", o.owner_pid, line));
      }
    } catch (const Error& e) {
      say(fmt::format("restoring {} for process {} failed: {}", journal.string(), o.owner_pid,
                      e.what()));
      left += device::restore_target_gone(e) ? 0 : 1;
    }
  }
  return left;
}

}  // namespace

std::vector<std::string> guardian_args(const GuardianOptions& o) {
  std::vector<std::string> args;
  if (o.owner_pipe_fd >= 0) {
    args.insert(args.end(), {"--pipe-fd", std::to_string(o.owner_pipe_fd)});
  }
  if (o.owner_pid > 0) {
    args.insert(args.end(), {"--pid", std::to_string(o.owner_pid)});
  }
  for (const auto& dir : o.journal_dirs) {
    args.insert(args.end(), {"--journal-dir", dir.string()});
  }
  for (const auto& journal : o.journals) {
    args.insert(args.end(), {"--journal", journal.string()});
  }
  args.insert(args.end(), {"--node-rank", std::to_string(o.node_rank), "--grace-ms",
                           std::to_string(o.grace_period.count()), "--retry-for-s",
                           std::to_string(o.retry_for.count()), "--name", o.name});
  return args;
}

GuardianOptions parse_guardian_args(const std::vector<std::string>& args) {
  GuardianOptions o;
  for (size_t i = 0; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) {
      throw ConfigError(fmt::format("guardian: {} needs a value", flag));
    }
    const std::string& value = args[i + 1];
    const auto number = [&](auto type_tag) {
      const auto n = parse_number<decltype(type_tag)>(value);
      if (!n || *n < 0) {
        throw ConfigError(fmt::format("guardian: {} '{}' is not a number", flag, value));
      }
      return *n;
    };
    if (flag == "--pipe-fd") {
      o.owner_pipe_fd = number(int{});
    } else if (flag == "--pid") {
      o.owner_pid = number(pid_t{});
    } else if (flag == "--journal-dir") {
      o.journal_dirs.emplace_back(value);
    } else if (flag == "--journal") {
      o.journals.emplace_back(value);
    } else if (flag == "--node-rank") {
      o.node_rank = number(int{});
    } else if (flag == "--grace-ms") {
      o.grace_period = std::chrono::milliseconds(number(int64_t{}));
    } else if (flag == "--retry-for-s") {
      o.retry_for = std::chrono::seconds(number(int64_t{}));
    } else if (flag == "--name") {
      o.name = value;
    } else {
      throw ConfigError(fmt::format("guardian: unknown argument '{}'", flag));
    }
  }
  if ((o.owner_pipe_fd >= 0) == (o.owner_pid > 0)) {
    throw ConfigError("guardian: give exactly one of --pipe-fd and --pid");
  }
  return o;
}

int guardian_main(const GuardianOptions& o) {
  // Hold nothing of the owner's but the pipe and the standard streams: a reader of the
  // launcher's stdout sees its end when the launcher ends, not when the guardian does.
  if (o.owner_pipe_fd > 3) {
    close_fd_range(3, static_cast<unsigned>(o.owner_pipe_fd - 1));
  }
  close_fd_range(static_cast<unsigned>(std::max(o.owner_pipe_fd + 1, 3)), ~0U);
  ignore_stop_signals();
  const auto say = [&](const std::string& text) {
    const std::string line = fmt::format("{}: {}\n", o.name, text);
    [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, line.data(), line.size());
  };
  std::vector<pid_t> groups;
  const Ending ending =
      o.owner_pipe_fd >= 0 ? watch_pipe(o.owner_pipe_fd, groups) : watch_pid(o.owner_pid);
  if (ending == Ending::kReleased) {
    return 0;
  }
  if (o.owner_pipe_fd >= 0) {
    say(fmt::format("the launcher died; stopping its {} worker group(s)", groups.size()));
  }
  for (pid_t g : groups) {
    ::kill(-g, SIGTERM);
  }
  if (!wait_gone(groups, Clock::now() + o.grace_period)) {
    for (pid_t g : groups) {
      ::kill(-g, SIGKILL);
    }
    wait_gone(groups, Clock::now() + std::chrono::seconds(5));
  }
  const auto deadline = Clock::now() + o.retry_for;
  for (int failures = 0;;) {
    if (restore_once(o, say) == 0) {
      return 0;
    }
    ++failures;
    const auto wait = device::restore_retry_delay(failures);
    if (Clock::now() + wait > deadline) {
      say(fmt::format(
          "gave up after {} attempt(s) in {} s: the journals stay for the next job on this node "
          "(it restores them before it starts), or `zeus restore-limits --journal FILE`",
          failures, o.retry_for.count()));
      return 1;
    }
    say(fmt::format("retrying in {} ms", wait.count()));
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace zeus::launch
