#include "zeus/launch/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/launch/elastic.h"
#include "zeus/launch/line_splitter.h"
#include "zeus/launch/rendezvous.h"
#include "zeus/launch/sentinel.h"
#include "zeus/launch/signal_scope.h"
#include "zeus/process/child.h"

namespace zeus::launch {
namespace {

using Clock = std::chrono::steady_clock;

// How long to keep reading a worker's pipes after it exited, for output that a process it left
// behind still holds open.
constexpr auto kDrainTimeout = std::chrono::seconds(2);
// How long the others may take to end by themselves after a worker exited with a non-zero code,
// before they are stopped: long enough for ranks finishing the same step, short against the
// grace period (bench/launcher measures failure-to-exit with it).
constexpr auto kPeerExitWindow = std::chrono::milliseconds(30);

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;  // console gone (EPIPE): the run goes on, the log files still get the lines
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

using process::signal_name;

// The launcher was told to stop by `sig` and its workers are gone: say so; zeus run's exit code.
int stopped(int sig, const std::function<void(const std::string&)>& say) {
  say(fmt::format("stopped by {}; forwarded it to the workers, all of which have exited",
                  signal_name(sig)));
  return 128 + sig;
}

void make_dirs(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw_posix_error("create log directory", dir.string(), ec.value());
  }
}

struct Stream {
  UniqueFd pipe;     // read end; closed at EOF
  UniqueFd log;      // per-rank log file, when writing one
  int console = -1;  // fd for prefixed lines, -1 when redirected to the file only
  LineSplitter splitter;
};

struct Worker {
  const WorkerSpec* spec = nullptr;
  process::Child child;
  Clock::time_point started;
  std::array<Stream, 2> streams;  // stdout, stderr
  std::deque<std::string> tail;
  std::optional<WorkerExit> exit;
};

// One attempt: start every worker, watch them until all are gone.
class Attempt {
 public:
  struct Result {
    std::optional<WorkerExit> failure;
    int stop_signal = 0;  // the launcher was told to stop
    // Every worker exited by itself with the failure's code (a program's own outcome, such as
    // "target not reached"), none killed by a signal: nothing was stopped.
    bool all_exited_alike = false;
    // Elastic: the rendezvous ended the round (membership change, a failure elsewhere, abort);
    // the workers were stopped for it.
    std::optional<RendezvousNotice> notice;
  };

  Attempt(const LaunchPlan& plan, const SupervisorIo& io, int restart_count, int signal_fd,
          Sentinel& sentinel, Rendezvous* rendezvous = nullptr)
      : plan_(plan),
        io_(io),
        restart_count_(restart_count),
        signal_fd_(signal_fd),
        sentinel_(sentinel),
        rendezvous_(rendezvous) {}

  ~Attempt() {
    // Whatever happens (an exception included), nothing of this attempt outlives it: the
    // groups get SIGKILL here, the children are reaped by their destructors.
    for (auto& w : workers_) {
      w.child.signal(SIGKILL);
    }
  }

  Result run() {
    workers_.resize(plan_.workers.size());
    std::vector<pid_t> groups;
    for (size_t i = 0; i < workers_.size(); ++i) {
      start(workers_[i], plan_.workers[i]);
      groups.push_back(workers_[i].child.pid());
    }
    sentinel_.watch(groups);
    std::optional<Clock::time_point> drain_until;
    while (true) {
      const bool all_exited = running_ == 0;
      if (all_exited && !drain_until) {
        drain_until = Clock::now() + kDrainTimeout;
      }
      if (all_exited && (open_streams() == 0 || Clock::now() >= *drain_until)) {
        break;
      }
      std::optional<Clock::time_point> deadline = kill_at_;
      if (stop_at_ && (!deadline || *stop_at_ < *deadline)) {
        deadline = stop_at_;
      }
      poll_once(all_exited ? std::optional(*drain_until) : deadline);
      if (stop_at_ && Clock::now() >= *stop_at_) {
        stop_at_.reset();
        if (running_ > 0 && !stopping_) {
          begin_stop(SIGTERM);
        }
      }
      if (kill_at_ && Clock::now() >= *kill_at_) {
        signal_all(SIGKILL);
        kill_at_.reset();
      }
    }
    for (auto& w : workers_) {
      for (auto& s : w.streams) {
        s.splitter.finish([&](std::string_view line) { emit(w, s, line); });
      }
      // Processes a worker left behind in its group do not outlive the attempt.
      w.child.signal(SIGKILL);
    }
    Result result;
    result.stop_signal = stop_signal_;
    result.notice = notice_;
    if (failed_ && stop_signal_ == 0 && !notice_) {
      Worker& w = workers_[*failed_];
      result.failure = *w.exit;
      result.failure->last_lines = w.tail;
      result.all_exited_alike = std::all_of(workers_.begin(), workers_.end(), [&](const Worker& o) {
        return o.exit && o.exit->signal == 0 && o.exit->exit_code == w.exit->exit_code;
      });
    }
    return result;
  }

 private:
  void start(Worker& w, const WorkerSpec& spec) {
    w.spec = &spec;
    std::array<UniqueFd, 2> write_ends;  // the child's stdout and stderr; closed here after start
    for (size_t k = 0; k < 2; ++k) {
      std::array<int, 2> ends{};
      check_posix(::pipe2(ends.data(), O_CLOEXEC), "create a pipe for a worker's output",
                  fmt::format("rank {}", spec.rank));
      w.streams[k].pipe = UniqueFd(ends[0]);
      write_ends[k] = UniqueFd(ends[1]);
      const int bit = k == 0 ? 1 : 2;
      w.streams[k].console =
          (spec.redirect_bits & bit) || !spec.console ? -1 : (k == 0 ? io_.out_fd : io_.err_fd);
      if (!plan_.log_dir.empty()) {
        const auto dir =
            plan_.log_dir / fmt::format("attempt_{}", restart_count_) / std::to_string(spec.rank);
        make_dirs(dir);
        const auto path = dir / (k == 0 ? "stdout.log" : "stderr.log");
        w.streams[k].log = UniqueFd(
            check_posix(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644),
                        "open worker log", path.string()));
      }
    }
    const std::map<std::string, std::string> env = attempt_env(spec, restart_count_);
    w.child = process::Child::start({
        .argv = spec.argv,
        .env_overrides = env,
        // Catchable, so a worker's PowerLimitGuard restores its limits when the launcher dies;
        // the sentinel sends SIGKILL after the grace period to a worker that does not end.
        .parent_death_signal = SIGTERM,
        .stdout_fd = process::ChildFd::from(write_ends[0].get()),
        .stderr_fd = process::ChildFd::from(write_ends[1].get()),
        .what = fmt::format("rank {}", spec.rank),
    });
    for (auto& s : w.streams) {
      ::fcntl(s.pipe.get(), F_SETFL, O_NONBLOCK);
    }
    w.started = Clock::now();
    ++running_;
  }

  size_t open_streams() const {
    size_t n = 0;
    for (const auto& w : workers_) {
      for (const auto& s : w.streams)
        n += s.pipe.get() >= 0 ? 1 : 0;
    }
    return n;
  }

  void poll_once(std::optional<Clock::time_point> deadline) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<std::pair<Worker*, Stream*>> owners{{nullptr, nullptr}};
    const int rendezvous_fd = rendezvous_ != nullptr && !notice_ ? rendezvous_->fd() : -1;
    if (rendezvous_fd >= 0) {
      fds.push_back({rendezvous_fd, POLLIN, 0});
      owners.emplace_back(nullptr, nullptr);
    }
    for (auto& w : workers_) {
      for (auto& s : w.streams) {
        if (s.pipe.get() >= 0) {
          fds.push_back({s.pipe.get(), POLLIN, 0});
          owners.emplace_back(&w, &s);
        }
      }
    }
    int timeout_ms = -1;
    if (deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR)
        return;
      throw_posix_error("poll", "the workers' pipes", errno);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      if (owners[i].first == nullptr) {
        // The round ended elsewhere: stop the workers (not a failure of theirs).
        notice_ = rendezvous_->wait_notice(std::chrono::milliseconds(0));
        if (notice_ && running_ > 0 && !stopping_) {
          begin_stop(SIGTERM);
        }
        continue;
      }
      read_stream(*owners[i].first, *owners[i].second);
    }
    if (fds[0].revents & POLLIN) {
      read_signals();
    }
  }

  void read_stream(Worker& w, Stream& s) {
    char buffer[65536];
    while (true) {
      const ssize_t n = ::read(s.pipe.get(), buffer, sizeof(buffer));
      if (n > 0) {
        s.splitter.feed(std::string_view(buffer, static_cast<size_t>(n)),
                        [&](std::string_view line) { emit(w, s, line); });
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      s.splitter.finish([&](std::string_view line) { emit(w, s, line); });
      s.pipe.reset();  // EOF (or an error: nothing more will come)
      return;
    }
  }

  void emit(Worker& w, Stream& s, std::string_view line) {
    std::string prefixed = fmt::format("[{}] {}\n", w.spec->rank, line);
    if (s.console >= 0) {
      write_all(s.console, prefixed);
    }
    if (s.log.get() >= 0) {
      write_all(s.log.get(), prefixed.substr(prefixed.find(' ') + 1));
    }
    prefixed.pop_back();
    w.tail.push_back(std::move(prefixed));
    if (w.tail.size() > io_.tail_lines)
      w.tail.pop_front();
  }

  void read_signals() {
    signalfd_siginfo info{};
    while (::read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
      } else if (sig == SIGUSR1 || sig == SIGUSR2) {
        signal_running(sig);
      } else if (stop_signal_ == 0) {
        // SIGINT, SIGTERM, SIGHUP: pass it on, give the workers the grace period to finish.
        stop_signal_ = sig;
        begin_stop(sig);
      } else {
        signal_all(SIGKILL);  // asked twice: stop now
      }
    }
    reap();  // SIGCHLDs coalesce: look for every exited child each time
  }

  // Each worker by its own pid (the sentinel is reaped by its owner, and noticed when it died).
  void reap() {
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = workers_[i];
      if (!w.child.running())
        continue;
      const std::optional<process::ExitStatus> status = w.child.try_wait();
      if (!status)
        continue;
      --running_;
      WorkerExit e;
      e.rank = w.spec->rank;
      e.local_rank = w.spec->local_rank;
      e.pid = w.child.pid();
      e.elapsed = Clock::now() - w.started;
      e.signal = status->signal;
      e.exit_code = status->exit_code;
      w.exit = e;
      if (e.exit_code != 0 && !failed_ && !stopping_) {
        failed_ = i;
        if (e.signal != 0) {
          begin_stop(SIGTERM);  // a crash: the others are stuck waiting for it
        } else {
          // A program's own exit code: its peers usually end the same way a moment later
          // ("target not reached"); give them that moment before stopping them.
          stop_at_ = Clock::now() + kPeerExitWindow;
        }
      }
    }
    if (const auto said = sentinel_.check(); said) {
      write_all(io_.err_fd, "zeus run: " + *said + "\n");
    }
  }

  void begin_stop(int sig) {
    stopping_ = true;
    signal_running(sig);
    kill_at_ = Clock::now() + plan_.grace_period;
  }

  void signal_running(int sig) {
    for (auto& w : workers_) {
      if (w.child.running())
        w.child.signal(sig);
    }
  }

  void signal_all(int sig) {
    for (auto& w : workers_) {
      w.child.signal(sig);
    }
  }

  const LaunchPlan& plan_;
  const SupervisorIo& io_;
  int restart_count_;
  int signal_fd_;
  Sentinel& sentinel_;
  Rendezvous* rendezvous_;
  std::optional<RendezvousNotice> notice_;
  std::vector<Worker> workers_;
  size_t running_ = 0;
  std::optional<size_t> failed_;
  bool stopping_ = false;
  int stop_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> stop_at_;  // stop the others then, unless they all ended
};

}  // namespace

std::string describe_exit(const WorkerExit& e) {
  if (e.signal != 0) {
    return fmt::format("was killed by {} (exit code {})", signal_name(e.signal), e.exit_code);
  }
  return fmt::format("exited with code {}", e.exit_code);
}

Supervisor::Supervisor(LaunchPlan plan, SupervisorIo io)
    : plan_(std::move(plan)), io_(std::move(io)) {}

std::vector<std::filesystem::path> Supervisor::journal_dirs() const {
  // The journal handshake (contract/worker_env.h): the workers were told this one directory;
  // with a run directory of its own, the other runs' beside it too (their owners may be gone).
  std::vector<std::filesystem::path> dirs{plan_.journal_dir};
  if (plan_.run_journals_root) {
    for (auto& dir : contract::list_run_journal_dirs(*plan_.run_journals_root)) {
      if (dir != plan_.journal_dir) {
        dirs.push_back(std::move(dir));
      }
    }
  }
  return dirs;
}

int Supervisor::run() {
  const std::vector<std::filesystem::path> made = missing_journal_dirs(plan_);
  const int code = run_attempts();
  remove_empty_journal_dirs(plan_, made);
  return code;
}

int Supervisor::run_attempts() {
  // Before the signal mask and any worker: the sentinel inherits neither.
  Sentinel sentinel({.journal_dirs = journal_dirs(),
                     .node_rank = plan_.node_rank,
                     .grace_period = plan_.grace_period,
                     .err_fd = io_.err_fd});
  SignalScope signals;
  auto say = [&](const std::string& text) { write_all(io_.err_fd, "zeus run: " + text + "\n"); };
  settle_journals(journal_dirs(), say);  // an earlier job's, before any worker
  if (plan_.elastic) {
    return run_elastic(sentinel, signals.fd(), say);
  }
  for (int restart = 0;; ++restart) {
    Attempt::Result result;
    {
      Attempt attempt(plan_, io_, restart, signals.fd(), sentinel);
      result = attempt.run();
    }
    settle_journals(journal_dirs(), say);
    if (result.stop_signal != 0) {
      return stopped(result.stop_signal, say);
    }
    if (!result.failure) {
      return 0;
    }
    const WorkerExit& f = *result.failure;
    if (result.all_exited_alike) {
      say(fmt::format("all {} workers exited with code {} by themselves (nothing was stopped)",
                      plan_.workers.size(), f.exit_code));
      if (restart < plan_.max_restarts && f.exit_code != 0) {
        say(fmt::format("restarting all workers (restart {} of {})", restart + 1,
                        plan_.max_restarts));
        continue;
      }
      return f.exit_code;
    }
    say_failure(f, restart, say);
    if (restart < plan_.max_restarts) {
      say(fmt::format("restarting all workers (restart {} of {})", restart + 1,
                      plan_.max_restarts));
      continue;
    }
    return f.exit_code;
  }
}

void Supervisor::say_failure(const WorkerExit& f, int attempt,
                             const std::function<void(const std::string&)>& say) const {
  say(fmt::format(
      "rank {} (local rank {}, pid {}, host {}) {} after {:.2f} s; stopped the other workers{}",
      f.rank, f.local_rank, f.pid, host_name(), describe_exit(f), f.elapsed.count(),
      plan_.log_dir.empty()
          ? ""
          : fmt::format(" (logs: {})", (plan_.log_dir / fmt::format("attempt_{}", attempt) /
                                        std::to_string(f.rank))
                                           .string())));
  if (!f.last_lines.empty()) {
    say(fmt::format("last {} line(s) of rank {}:", f.last_lines.size(), f.rank));
    for (const auto& line : f.last_lines)
      say("  " + line);
  }
}

int Supervisor::run_elastic(Sentinel& sentinel, int signal_fd,
                            const std::function<void(const std::string&)>& say) {
  const ElasticPlan& e = *plan_.elastic;
  std::unique_ptr<Rendezvous> rendezvous;
  try {
    rendezvous = make_rendezvous(e, static_cast<int>(plan_.workers.size()), say);
  } catch (const Error& err) {
    say(err.what());
    return 1;
  }
  Rendezvous& client = *rendezvous;
  for (int attempt_number = 0;; ++attempt_number) {
    RendezvousRound round;
    try {
      round = client.join();
    } catch (const Error& err) {
      say(err.what());
      return 1;
    }
    apply_round(plan_, round);
    say(fmt::format("round {}: node {} of {}, world size {} (ranks {}..{}), master {}:{}",
                    round.round, round.node_rank, round.nnodes, round.world_size, round.first_rank,
                    round.first_rank + plan_.workers.size() - 1, round.master_addr,
                    round.master_port));
    Attempt::Result result;
    {
      Attempt attempt(plan_, io_, attempt_number, signal_fd, sentinel, &client);
      result = attempt.run();
    }
    settle_journals(journal_dirs(), say);
    if (result.stop_signal != 0) {
      return stopped(result.stop_signal, say);
    }
    std::optional<RendezvousNotice> notice = result.notice;
    if (!notice && !result.failure) {
      try {
        client.report_done();
        if (!client.wait_finished(e.rendezvous.join_timeout)) {
          say("the other nodes did not finish within join_timeout; stopping the rendezvous");
        }
      } catch (const Error& err) {
        say(fmt::format("this node's workers finished, but the rendezvous could not be told: {}",
                        err.what()));
      }
      return 0;
    }
    int exit_code = 1;  // an abort for another node's failures
    if (!notice) {
      const WorkerExit& f = *result.failure;
      say_failure(f, attempt_number, say);
      exit_code = f.exit_code;
      try {
        client.report_failure(fmt::format("rank {} (pid {}, host {}) {}", f.rank, f.pid,
                                          host_name(), describe_exit(f)));
      } catch (const Error& err) {
        say(fmt::format("the rendezvous could not be told of the failure: {}", err.what()));
        return exit_code;
      }
      notice = client.wait_notice(e.rendezvous.join_timeout);
      if (!notice) {
        say("the rendezvous did not answer the failure within join_timeout");
        return exit_code;
      }
    }
    if (notice->kind == RendezvousNotice::Kind::kAbort) {
      say(fmt::format("the rendezvous ended the run: {}", notice->reason));
      return exit_code;
    }
    say(fmt::format("round {} ended ({}); joining the next round", round.round, notice->reason));
  }
}

}  // namespace zeus::launch
