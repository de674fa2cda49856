#include "zeus/dist/spawn.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/atomic_file.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/dist/context.h"

namespace zeus::dist {
namespace {

int free_loopback_port() {
  const int fd = check_posix(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket", "TCP");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) {
    throw DistError("spawn: cannot find a free TCP port on 127.0.0.1");
  }
  return ntohs(addr.sin_port);
}

std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  return args;
}

pid_t start_worker(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& extra) {
  const ChildArgs child(args, extra);
  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child.argv(), child.envp());
  if (rc != 0) {
    throw_posix_error("spawning worker", "/proc/self/exe", rc);
  }
  return pid;
}

// A worker's failure, as it left it for the parent: when, whether it was only a consequence of
// another rank's failure (PeerFailed), and the message.
struct WorkerError {
  int64_t when_ns = 0;
  bool consequence = false;
  std::string message;
};

void leave_error(const std::exception& e, bool consequence) {
  const auto dir = get_env(kEnvSpawnErrorDir);
  const auto rank = cluster::process_env("RANK");
  if (!dir || !rank) {
    return;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  try {
    write_file_atomic(std::filesystem::path(*dir) / ("rank" + *rank + ".err"),
                      fmt::format("{}\n{}\n{}", now, consequence ? 1 : 0, e.what()));
  } catch (const Error&) {
    // The parent still sees the exit code.
  }
}

std::optional<WorkerError> read_error(const std::filesystem::path& path) {
  std::ifstream in(path);
  WorkerError err;
  int consequence = 0;
  if (!(in >> err.when_ns >> consequence)) {
    return std::nullopt;
  }
  in.ignore(1);
  std::getline(in, err.message, '\0');
  err.consequence = consequence != 0;
  return err;
}

}  // namespace

int spawn(const SpawnOptions& options, const std::function<void(Context&)>& fn) {
  if (get_env(kEnvSpawnWorker)) {
    // Record the error before unwinding: tearing the process group down takes long enough for
    // the peers to fail first, and the parent must name the rank that caused it.
    try {
      auto ctx = init(options.init);
      fn(*ctx);
      ctx->barrier();  // nobody tears down the store while a peer still needs it
      return 0;
    } catch (const PeerFailed& e) {
      leave_error(e, true);
      throw;
    } catch (const std::exception& e) {
      leave_error(e, false);
      throw;
    }
  }
  if (options.nprocs < 1) {
    throw ConfigError(fmt::format("spawn: nprocs {} must be at least 1", options.nprocs));
  }
  const int port = free_loopback_port();
  const auto args = own_arguments();
  std::string error_dir = (std::filesystem::temp_directory_path() / "zeus-spawn-XXXXXX").string();
  if (::mkdtemp(error_dir.data()) == nullptr) {
    throw_posix_error("creating spawn error directory", error_dir, errno);
  }
  std::map<pid_t, int> rank_of;
  for (int r = 0; r < options.nprocs; ++r) {
    const std::map<std::string, std::string> env{
        {"RANK", std::to_string(r)},
        {"LOCAL_RANK", std::to_string(r)},
        {"WORLD_SIZE", std::to_string(options.nprocs)},
        {"LOCAL_WORLD_SIZE", std::to_string(options.nprocs)},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)},
        {std::string(kEnvSpawnWorker.name), "1"},
        {std::string(kEnvSpawnErrorDir.name), error_dir}};
    rank_of[start_worker(args, env)] = r;
  }
  // Note [spawn supervision]: the first worker to fail stops the others (SIGTERM), so a job
  // never waits on ranks that can no longer finish.
  std::string failure;
  while (!rank_of.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    const auto it = rank_of.find(pid);
    if (it == rank_of.end()) {
      continue;
    }
    const int rank = it->second;
    rank_of.erase(it);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failure.empty()) {
      failure = WIFEXITED(status)
                    ? fmt::format("spawned worker rank {} (pid {}) exited with code {}", rank, pid,
                                  WEXITSTATUS(status))
                    : fmt::format("spawned worker rank {} (pid {}) was killed by signal {}", rank,
                                  pid, WTERMSIG(status));
      for (const auto& [other, r] : rank_of) {
        ::kill(other, SIGTERM);
      }
    }
  }
  // The root cause is the earliest error that was not a consequence of another rank's failure.
  std::optional<std::pair<int, WorkerError>> root;
  for (int r = 0; r < options.nprocs; ++r) {
    const auto err = read_error(std::filesystem::path(error_dir) / fmt::format("rank{}.err", r));
    if (err &&
        (!root || (root->second.consequence && !err->consequence) ||
         (root->second.consequence == err->consequence && err->when_ns < root->second.when_ns))) {
      root = std::pair{r, *err};
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(error_dir, ec);
  if (root) {
    throw PeerFailed(
        fmt::format("spawned worker rank {} failed: {}; the other workers were stopped",
                    root->first, root->second.message));
  }
  if (!failure.empty()) {
    throw PeerFailed(failure + "; the other workers were stopped; see the failed rank's output");
  }
  return 0;
}

}  // namespace zeus::dist
