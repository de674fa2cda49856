#include "zeus/distributed/spawn.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
#include "zeus/contract/worker_env.h"
#include "zeus/distributed/context.h"
#include "zeus/process/child.h"

namespace zeus::distributed {
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

process::Child start_worker(int rank, const std::vector<std::string>& args,
                            const std::map<std::string, std::string>& extra) {
  // argv[0] as this process got it, the program itself from /proc/self/exe.
  process::ChildSpec spec{.argv = args,
                          .program = "/proc/self/exe",
                          .env_overrides = extra,
                          // In our process group: a terminal's Ctrl-C reaches the ranks as before.
                          .own_group = false,
                          .parent_death_signal = SIGTERM,
                          .what = fmt::format("spawned worker rank {}", rank)};
  return process::Child::start(spec);
}

// Waits until one of `children` (some may have ended) exits or `until`; polls their pidfds.
void wait_any(std::vector<process::Child>& children,
              std::optional<std::chrono::steady_clock::time_point> until) {
  std::vector<pollfd> fds;
  bool all_pollable = true;
  for (auto& c : children) {
    if (c.running()) {
      all_pollable = all_pollable && c.exit_fd() >= 0;
      fds.push_back({c.exit_fd(), POLLIN, 0});
    }
  }
  int timeout_ms = all_pollable ? 1000 : 5;
  if (until) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*until - std::chrono::steady_clock::now());
    timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, timeout_ms));
  }
  ::poll(fds.data(), fds.size(), timeout_ms);
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
  std::vector<process::Child> children;
  children.reserve(static_cast<size_t>(options.nprocs));
  for (int r = 0; r < options.nprocs; ++r) {
    contract::WorkerEnv world;
    world.rank = world.local_rank = r;
    world.world_size = world.local_world_size = options.nprocs;
    world.master_addr = "127.0.0.1";
    world.master_port = port;
    std::map<std::string, std::string> env = world.to_env();
    env[std::string(kEnvSpawnWorker.name)] = "1";
    env[std::string(kEnvSpawnErrorDir.name)] = error_dir;
    children.push_back(start_worker(r, args, env));
  }
  // Note [spawn supervision]: the first worker to fail stops the others (SIGTERM, then SIGKILL
  // after the grace period), so a job never waits on ranks that can no longer finish.
  std::string failure;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  size_t running = children.size();
  while (running > 0) {
    wait_any(children, kill_at);
    for (size_t r = 0; r < children.size(); ++r) {
      auto& child = children[r];
      if (!child.running()) {
        continue;
      }
      const auto status = child.try_wait();
      if (!status) {
        continue;
      }
      --running;
      if (!status->ok() && failure.empty()) {
        failure =
            fmt::format("spawned worker rank {} (pid {}) {}", r, child.pid(), status->describe());
        for (auto& other : children) {
          other.signal(SIGTERM);
        }
        kill_at = std::chrono::steady_clock::now() + options.grace_period;
      }
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      for (auto& other : children) {
        other.signal(SIGKILL);
      }
      kill_at.reset();
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

}  // namespace zeus::distributed
