// The guardian: the one program that puts back what a run changed when the process that changed
// it cannot (SIGKILL, the OOM killer, a crash). The launcher's sentinel and a Python optimizer's
// watchdog are both this program, started by exec (never by a fork of a process that may have
// threads): `zeus __guardian ...` for `zeus run`, `python -m zeus_cpp._watchdog ...` for the
// Python package (its body is this one, through _core.guardian_main).
//
// Note [the guardian]
// Whom it guards is one of:
//   - a pipe (the launcher): "G <pgid> ...\n" names the current attempt's worker process groups,
//     "D\n" says the run is over (exit); end of file without "D" means the launcher died: every
//     group gets SIGTERM, SIGKILL after the grace period, and the node's journals are settled
//     (launch::settle_journals);
//   - a pid (a Python process): watched by a pidfd; "D" on stdin says its limits are back
//     (exit); its end without that restores the given journals. It prints "ready" once it
//     watches.
// Restoring follows the restore rule (device/restore_rule.h): what fails is retried with the
// backoff for up to `retry_for`, then left in its journal for the next job (which restores it
// before it starts) and said; a GPU that is gone is not retried. It runs in a session of its
// own, ignoring SIGINT, SIGTERM and SIGHUP (a signal to the job's group or terminal must not
// stop it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::launch {

// The argument that makes the zeus CLI the guardian (hidden from its help).
inline constexpr std::string_view kGuardianCommand = "__guardian";

struct GuardianOptions {
  int owner_pipe_fd = -1;                           // the launcher's pipe (read end), or -1
  pid_t owner_pid = 0;                              // the process watched, or 0
  std::vector<std::filesystem::path> journal_dirs;  // the node's journal directories
  int node_rank = 0;
  std::vector<std::filesystem::path> journals;  // journal files (a Python process's own)
  std::chrono::milliseconds grace_period{0};    // SIGTERM to the groups, then SIGKILL after this
  std::chrono::seconds retry_for{60};
  std::string name = "guardian";  // how its lines begin: "zeus run (sentinel)"
};

// The argument words of `options` (after kGuardianCommand), and back. parse throws ConfigError
// naming the word it does not understand.
std::vector<std::string> guardian_args(const GuardianOptions& options);
GuardianOptions parse_guardian_args(const std::vector<std::string>& args);

// The guardian's body: returns its exit code (0: nothing left lowered that it could restore).
int guardian_main(const GuardianOptions& options);

}  // namespace zeus::launch
