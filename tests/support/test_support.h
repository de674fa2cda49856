// Helpers shared by the test suites: temporary directories, the fake NVML library's state file,
// environment overrides, and child processes.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zeus/process/child.h"

namespace zeus::test {

// Whether the tests run in CI (CI=true, as .ci/run and hosted CI set it): there, a test whose
// real server (Slurm, PostgreSQL, etcd, Prometheus, the Pushgateway) cannot start fails instead
// of skipping, since CI installed them (scripts/install-deps.sh); on a developer's machine it
// skips with the reason.
bool in_ci();

// In a TEST or SetUp: skips saying `why` (fails in CI, see in_ci()).
#define ZEUS_SKIP_WITHOUT_SERVER(why)                                                             \
  do {                                                                                            \
    if (::zeus::test::in_ci()) {                                                                  \
      FAIL() << (why) << " (CI=true: a server CI installed must start; scripts/install-deps.sh)"; \
    }                                                                                             \
    GTEST_SKIP() << (why);                                                                        \
  } while (false)

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets (or unsets, with std::nullopt) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

struct FakeGpu {
  std::string name = "NVIDIA A40";
  std::string uuid;
  int64_t power_mw = 150'000;
  int64_t energy_mj = 1'000'000;
  int64_t limit_mw = 300'000;
  int64_t min_limit_mw = 100'000;
  int64_t max_limit_mw = 300'000;
  int64_t default_limit_mw = 300'000;
  bool instant_power = true;
  bool energy_counter = true;
  std::vector<std::string> mig_uuids;  // MIG instances on this GPU ("MIG-...")
};

struct FakeNvmlOptions {
  // Whether a process that is not root may set (the real NVML refuses it). On for the tests whose
  // unprivileged processes set limits directly; off where the daemon must be what makes it work.
  bool permissive = true;
};

// NVML return codes a test gives the fake's per-GPU "set_error": one any retry may get past, and
// the GPU gone (GPU_IS_LOST), which the restore rule does not retry.
inline constexpr int kNvmlErrorUnknown = 999;
inline constexpr int kNvmlErrorGpuIsLost = 15;

// The state file of a fake vendor library (tests/fakes/fake_state_file.h): the test's side,
// changed under the library's own lock so that no set by another process is lost.
class FakeMachine {
 public:
  const std::filesystem::path& state_path() const { return state_path_; }
  // Fault switches; take effect at the next library call (the fake re-reads a changed file).
  void set_fault(const std::string& name, const nlohmann::json& value);
  // Sets one field of GPU `index` (the library's order).
  void set_gpu_value(int index, const std::string& key, const nlohmann::json& value);
  nlohmann::json state() const;

 protected:
  explicit FakeMachine(const std::string& file_name);
  void write(const nlohmann::json& state) const;
  void update(const std::function<void(nlohmann::json&)>& mutate) const;
  TempDir dir_;
  std::filesystem::path state_path_;
};

// A fake NVML machine: writes the state file and points ZEUS_NVML_LIBRARY and FAKE_NVML_STATE
// at the fake library and the file for the scope (child processes inherit both).
class FakeNvml : public FakeMachine {
 public:
  explicit FakeNvml(std::vector<FakeGpu> gpus, bool minimal_library = false,
                    FakeNvmlOptions options = {});
  int64_t limit_mw(int nvml_index) const;
  // (gpu, limit_mw) of every successful set, in order.
  std::vector<std::pair<int, int64_t>> limit_history() const;

 private:
  std::optional<ScopedEnv> library_env_;
  std::optional<ScopedEnv> state_env_;
};

// Pids of the running processes whose environment holds ZEUS_TEST_MARK=<mark> (a test marks a
// run this way, so that it finds every process of it: launcher, sentinel, workers).
std::vector<int> marked(const std::string& mark);
// A fresh mark for ZEUS_TEST_MARK.
std::string new_mark();
// Whether every thread of `pid` is stopped (SIGSTOP took effect: kill() only queues it, and a
// thread on another core runs on for a moment), or the process is gone or a zombie.
bool stopped_or_gone(int pid);
// Whether `pid` has died (gone, or a zombie its stopped parent has not reaped): it can no longer
// act.
bool dead_or_zombie(int pid);

// Polls `pred` every 20 ms until it holds or `timeout` passed; its last answer.
bool eventually(const std::function<bool()>& pred, std::chrono::seconds timeout);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
int free_port();

// Four A40s with distinct UUIDs GPU-00000000-...-00000000000<i>.
std::vector<FakeGpu> four_a40s();

// A fake powercap tree: intel-rapl:0 (package-0, with core and dram sub-zones, range 10'000 uJ)
// and intel-rapl:1 (package-1, no dram). Counters start at 1000 (pkg 0), 200 (dram), 0 (pkg 1).
class FakeRapl {
 public:
  FakeRapl();
  void add_zone(const std::string& rel, const std::string& name, int64_t energy_uj,
                int64_t range_uj);
  void set(const std::string& rel, int64_t energy_uj);
  const std::filesystem::path& root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// rank -> (key -> value) from a launcher's "[r] key=value" lines (the launch worker's `env`).
std::map<int, std::map<std::string, std::string>> by_rank(const std::string& out);

// Runs argv to completion (stdin /dev/null), capturing stdout and stderr.
ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::seconds timeout = std::chrono::seconds(60));

// A child process with stdout on a pipe; killed (SIGKILL) on destruction if still running.
class Child;

// One rank of a job run_ranks() started: its result and the "key=value" lines it printed.
struct RankRun {
  ProcessResult process;
  std::map<std::string, std::string> values;
};

// Starts `world` processes of argv with torchrun's variables for ranks 0..world-1 on a free
// loopback port (plus `env`), and waits for all of them.
std::vector<RankRun> run_ranks(const std::vector<std::string>& argv, int world,
                               const std::map<std::string, std::string>& env = {});

class Child {
 public:
  // Where the child's stderr goes: the test's own, or the pipe that stdout goes to.
  enum class Stderr { kInherit, kMerged };
  // `env` adds to (or overrides) this process's environment for the child.
  explicit Child(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env = {}, Stderr err = Stderr::kInherit);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Reads stdout until `text` appears; false on EOF or timeout.
  bool wait_for_output(const std::string& text, std::chrono::seconds timeout);
  void kill(int signo);
  // Waits for exit and returns the result (stdout read so far; stderr only when merged).
  ProcessResult wait();
  int pid() const { return child_.pid(); }
  // What wait_for_output() has read so far.
  const std::string& output() const { return out_; }

 private:
  process::Child child_;
  int out_fd_ = -1;
  std::string out_;
};

}  // namespace zeus::test
