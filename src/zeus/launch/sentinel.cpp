#include "zeus/launch/sentinel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/launch/supervisor.h"

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

constexpr int kPipeFd = 3;  // the read end, in the sentinel

int sentinel_main(const SentinelOptions& o) {
  // Hold nothing of the launcher's but the pipe and the error stream (the process spec put them
  // at 2 and 3, /dev/null at 0 and 1): a reader of the launcher's stdout sees its end when the
  // launcher ends, not when the sentinel does.
  ::close_range(kPipeFd + 1, ~0U, 0);
  const int fd = kPipeFd;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    ::sigaction(sig, &ignore, nullptr);
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<pid_t> groups;
  std::string buffer;
  char chunk[512];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // the launcher is gone (or its pipe broke): clean up after it
    }
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      const std::string line = buffer.substr(0, nl);
      if (line == "D") {
        return 0;
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
  const auto say = [&](const std::string& text) {
    const std::string line = "zeus run (sentinel): " + text + "\n";
    [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, line.data(), line.size());
  };
  say(fmt::format("the launcher died; stopping its {} worker group(s)", groups.size()));
  for (pid_t g : groups) {
    ::kill(-g, SIGTERM);
  }
  if (!wait_gone(groups, Clock::now() + o.grace_period)) {
    for (pid_t g : groups) {
      ::kill(-g, SIGKILL);
    }
    wait_gone(groups, Clock::now() + std::chrono::seconds(5));
  }
  settle_journals(o.journal_dirs, o.node_rank, say);
  return 0;
}

}  // namespace

Sentinel::Sentinel(SentinelOptions options) : options_(std::move(options)) {
  start();
}

void Sentinel::start() {
  int fds[2];
  check_posix(::pipe2(fds, O_CLOEXEC), "create the sentinel's pipe", "zeus run");
  UniqueFd read_end(fds[0]);
  pipe_ = UniqueFd(fds[1]);  // only the launcher holds the write end: its death is our EOF
  child_ = process::Child::fork_function({.new_session = true,
                                          .stdin_fd = process::ChildFd::dev_null(),
                                          .stdout_fd = process::ChildFd::dev_null(),
                                          .stderr_fd = process::ChildFd::from(options_.err_fd),
                                          .extra_fds = {{kPipeFd, read_end.get()}},
                                          .what = "the sentinel"},
                                         [this] { return sentinel_main(options_); });
}

Sentinel::~Sentinel() {
  if (!child_.started()) {
    return;
  }
  const char done[] = "D\n";
  [[maybe_unused]] ssize_t n = ::write(pipe_.get(), done, sizeof(done) - 1);
  pipe_.reset();
  try {
    child_.wait();
  } catch (const Error&) {
    // Nothing left to wait for.
  }
}

std::optional<std::string> Sentinel::check() {
  const std::optional<process::ExitStatus> status = child_.try_wait();
  if (!status) {
    return std::nullopt;
  }
  const pid_t old = child_.pid();
  start();
  watch(groups_);
  return fmt::format(
      "the sentinel (pid {}) {}; started another (pid {}) to clean up if the launcher is killed",
      old, status->describe(), child_.pid());
}

void Sentinel::watch(const std::vector<pid_t>& pgids) {
  groups_ = pgids;
  std::string line = "G";
  for (pid_t g : pgids) {
    fmt::format_to(std::back_inserter(line), " {}", g);  // not " " + s: GCC 12 -O3 bug 105329
  }
  line += "\n";
  [[maybe_unused]] ssize_t n = ::write(pipe_.get(), line.data(), line.size());
}

}  // namespace zeus::launch
