// Starting and watching the workers of one node: each in its own process group, dying with the
// launcher (PR_SET_PDEATHSIG), their output prefixed line by line, the first failure stopping the
// rest (SIGTERM, grace period, SIGKILL), restarts, signal forwarding, and power limits restored
// from the journal once the workers are gone. Single-threaded: one poll() loop over a signalfd
// and the workers' pipes, so exits are seen the moment they happen, not at a polling interval.
#pragma once

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zeus/launch/launch_options.h"

namespace zeus::launch {

class Sentinel;

// How a worker ended.
struct WorkerExit {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal killed it (exit_code is then 128 + signal)
  std::chrono::duration<double> elapsed{};
  std::deque<std::string> last_lines;  // its final output lines, both streams, prefixed
};

struct SupervisorIo {
  int out_fd = 1;          // workers' stdout lines
  int err_fd = 2;          // workers' stderr lines and the launcher's own messages
  size_t tail_lines = 10;  // lines of output kept per worker for the failure summary
};

class Supervisor {
 public:
  Supervisor(LaunchPlan plan, SupervisorIo io);

  // Runs attempts until success, a failure with no restarts left, or a terminating signal.
  // Returns zeus run's exit code: 0, the first failed worker's code (128 + signal when killed),
  // or 128 + the signal that stopped the launcher. Blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP,
  // SIGUSR1, SIGUSR2 for its duration (they are read from a signalfd) and restores the mask.
  [[nodiscard]] int run();

 private:
  int run_attempts();
  // Where the workers' power-limit journals are: the plan's journal_dir, which they were told,
  // and the other runs' under the same root when the plan has one.
  std::vector<std::filesystem::path> journal_dirs() const;
  // The failed worker, where its logs are, and its last lines.
  void say_failure(const WorkerExit& failure, int attempt,
                   const std::function<void(const std::string&)>& say) const;
  // The elastic loop: join a round, run its attempt, until done, aborted or stopped.
  int run_elastic(Sentinel& sentinel, int signal_fd,
                  const std::function<void(const std::string&)>& say);

  LaunchPlan plan_;
  SupervisorIo io_;
};

// The plan's journal directory and those of its parents that do not exist yet, deepest first:
// made for the run's journals alone (a worker makes them when it first journals a limit).
std::vector<std::filesystem::path> missing_journal_dirs(const LaunchPlan& plan);

// Nothing is left where the user did not ask: the other runs' journal directories under
// zeus_log/.journals/ once settled and empty, and what this run made for its journals alone
// (`made`, from missing_journal_dirs before the run), once empty: a program that wrote its files
// elsewhere leaves no empty zeus_log/ (or launcher's ZEUS_LOG_DIR) behind. Only empty directories
// are removed: a journal still held, the program's own files and other runs' directories stay.
void remove_empty_journal_dirs(const LaunchPlan& plan,
                               const std::vector<std::filesystem::path>& made);

// The journals under `dirs` (every node's, whatever its rank, and the Python optimizers' process
// journals, contract::list_journals) whose owner is gone (or that a previous boot wrote) are
// settled (device::settle_gone_journals), telling `say` what was done; those of a live job or
// another host are left to them. Failures are said, not thrown. Returns how many journals are
// left that another attempt may restore (a GPU that is gone is not counted: Note [restore rule]).
int settle_journals(const std::vector<std::filesystem::path>& dirs,
                    const std::function<void(const std::string&)>& say);

// "exited with code 3" / "was killed by signal 9 (SIGKILL)".
std::string describe_exit(const WorkerExit& exit);

}  // namespace zeus::launch
