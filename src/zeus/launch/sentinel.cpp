#include "zeus/launch/sentinel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <iterator>
#include <string>
#include <utility>

#include "zeus/common/errors.h"
#include "zeus/launch/guardian.h"
#include "zeus/launch/supervisor.h"

namespace zeus::launch {
namespace {

constexpr int kPipeFd = 3;  // the read end, in the guardian

}  // namespace

Sentinel::Sentinel(SentinelOptions options) : options_(std::move(options)) {
  start();
}

void Sentinel::start() {
  int fds[2];
  check_posix(::pipe2(fds, O_CLOEXEC), "create the sentinel's pipe", "zeus run");
  UniqueFd read_end(fds[0]);
  pipe_ = UniqueFd(fds[1]);  // only the launcher holds the write end: its death is our EOF
  GuardianOptions guardian;
  guardian.owner_pipe_fd = kPipeFd;
  guardian.journal_dirs = options_.journal_dirs;
  guardian.node_rank = options_.node_rank;
  guardian.grace_period =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.grace_period);
  guardian.name = "zeus run (sentinel)";
  process::ChildSpec spec{.argv = {"zeus", std::string(kGuardianCommand)},
                          .program = options_.program,
                          .new_session = true,
                          .stdin_fd = process::ChildFd::dev_null(),
                          .stdout_fd = process::ChildFd::dev_null(),
                          .stderr_fd = process::ChildFd::from(options_.err_fd),
                          .extra_fds = {{kPipeFd, read_end.get()}},
                          .what = "the sentinel"};
  for (std::string& word : guardian_args(guardian)) {
    spec.argv.push_back(std::move(word));
  }
  child_ = process::Child::start(spec);
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
