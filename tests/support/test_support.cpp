#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "zeus/common/posix.h"
#include "zeus/process/child.h"

namespace zeus::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/zeus-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) {
    old_ = old;
  }
  if (value) {
    ::setenv(name_.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    ::setenv(name_.c_str(), old_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

std::vector<FakeGpu> four_a40s() {
  std::vector<FakeGpu> gpus(4);
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
    gpus[i].power_mw = 100'000 + 10'000 * static_cast<int64_t>(i);
  }
  return gpus;
}

FakeMachine::FakeMachine(const std::string& file_name) : state_path_(dir_ / file_name) {
  // Readable by every uid: the machine's "driver" state (zeusd's tests run clients as others).
  std::filesystem::permissions(
      dir_.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                       std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                       std::filesystem::perms::others_exec);
}

FakeNvml::FakeNvml(std::vector<FakeGpu> gpus, bool minimal_library, FakeNvmlOptions options)
    : FakeMachine("nvml-state.json") {
  nlohmann::json state;
  state["gpus"] = nlohmann::json::array();
  for (const auto& g : gpus) {
    state["gpus"].push_back({{"name", g.name},
                             {"uuid", g.uuid},
                             {"power_mw", g.power_mw},
                             {"energy_mj", g.energy_mj},
                             {"limit_mw", g.limit_mw},
                             {"min_limit_mw", g.min_limit_mw},
                             {"max_limit_mw", g.max_limit_mw},
                             {"default_limit_mw", g.default_limit_mw},
                             {"instant_power", g.instant_power},
                             {"energy_counter", g.energy_counter},
                             {"mig_uuids", g.mig_uuids}});
  }
  state["faults"] = nlohmann::json::object();
  state["permissive"] = options.permissive;
  state["limit_history"] = nlohmann::json::array();
  write(state);
  library_env_.emplace("ZEUS_NVML_LIBRARY",
                       minimal_library ? ZEUS_FAKE_NVML_MINIMAL : ZEUS_FAKE_NVML_FULL);
  state_env_.emplace("FAKE_NVML_STATE", state_path_.string());
}

void FakeMachine::write(const nlohmann::json& state) const {
  // Whole files only: processes using the fake re-read it at their next call.
  const std::filesystem::path tmp = state_path_.string() + ".tmp-test";
  {
    std::ofstream out(tmp);
    out << state.dump(2);
  }
  std::filesystem::rename(tmp, state_path_);
}

nlohmann::json FakeMachine::state() const {
  std::ifstream in(state_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

void FakeMachine::update(const std::function<void(nlohmann::json&)>& mutate) const {
  // Under the fake library's own lock, so that a set by another process is not lost.
  const std::string lock_path = state_path_.string() + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
    throw std::runtime_error("cannot lock " + lock_path);
  }
  nlohmann::json s = state();
  mutate(s);
  write(s);
  ::close(fd);
}

void FakeMachine::set_fault(const std::string& name, const nlohmann::json& value) {
  update([&](nlohmann::json& s) { s["faults"][name] = value; });
}

void FakeMachine::set_gpu_value(int index, const std::string& key, const nlohmann::json& value) {
  update([&](nlohmann::json& s) { s["gpus"][static_cast<size_t>(index)][key] = value; });
}

int64_t FakeNvml::limit_mw(int nvml_index) const {
  return state()["gpus"][static_cast<size_t>(nvml_index)]["limit_mw"].get<int64_t>();
}

std::vector<std::pair<int, int64_t>> FakeNvml::limit_history() const {
  std::vector<std::pair<int, int64_t>> out;
  const nlohmann::json s = state();  // not state()[...] in the range: it would dangle
  for (const auto& entry : s["limit_history"]) {
    out.emplace_back(entry["gpu"].get<int>(), entry["limit_mw"].get<int64_t>());
  }
  return out;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("cannot find a free port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

FakeRapl::FakeRapl() {
  add_zone("intel-rapl:0", "package-0", 1000, 10'000);
  add_zone("intel-rapl:0/intel-rapl:0:0", "core", 5, 10'000);
  add_zone("intel-rapl:0/intel-rapl:0:1", "dram", 200, 5'000);
  add_zone("intel-rapl:1", "package-1", 0, 10'000);
}

void FakeRapl::add_zone(const std::string& rel, const std::string& name, int64_t energy_uj,
                        int64_t range_uj) {
  const auto zone = dir_ / rel;
  std::filesystem::create_directories(zone);
  std::ofstream(zone / "name") << name << "\n";
  std::ofstream(zone / "max_energy_range_uj") << range_uj << "\n";
  set(rel, energy_uj);
}

void FakeRapl::set(const std::string& rel, int64_t energy_uj) {
  std::ofstream(dir_ / rel / "energy_uj") << energy_uj << "\n";
}

namespace {

process::Child spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
                     const std::map<std::string, std::string>& env = {}) {
  return process::Child::start({.argv = argv,
                                .env_overrides = env,
                                .own_group = false,  // kill() reaches the process alone
                                .stdin_fd = process::ChildFd::dev_null(),
                                .stdout_fd = process::ChildFd::from(out_fd),
                                .stderr_fd = process::ChildFd::from(err_fd),
                                .what = "a test's child"});
}

void fill_status(const process::ExitStatus& status, ProcessResult& result) {
  if (status.signal != 0) {
    result.signal = status.signal;
  } else {
    result.exit_code = status.exit_code;
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  TempDir dir;
  const auto out_path = dir / "stdout";
  const auto err_path = dir / "stderr";
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  process::Child child = spawn(argv, out_fd, err_fd);
  ::close(out_fd);
  ::close(err_fd);
  ProcessResult result;
  std::optional<process::ExitStatus> status = child.wait_for(timeout);
  if (!status) {
    status = child.stop(std::chrono::seconds(0), SIGKILL);
    ADD_FAILURE() << argv[0] << " timed out after " << timeout.count() << " s";
  }
  fill_status(*status, result);
  const auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

Child::Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             Stderr err) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  UniqueFd write_end(fds[1]);
  out_fd_ = fds[0];
  child_ = spawn(argv, write_end.get(), err == Stderr::kMerged ? write_end.get() : 2, env);
}

Child::~Child() {
  child_.signal(SIGKILL);  // reaped by child_'s destructor
  ::close(out_fd_);
}

bool Child::wait_for_output(const std::string& text, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out_.find(text) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd pfd{out_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    char buf[4096];
    const ssize_t n = ::read(out_fd_, buf, sizeof(buf));
    if (n <= 0) {
      return false;
    }
    out_.append(buf, static_cast<size_t>(n));
  }
  return true;
}

void Child::kill(int signo) {
  child_.signal(signo);
}

ProcessResult Child::wait() {
  ProcessResult result;
  fill_status(child_.wait(), result);
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(out_fd_, buf, sizeof(buf))) > 0) {
    out_.append(buf, static_cast<size_t>(n));
  }
  result.out = out_;
  return result;
}

std::vector<RankRun> run_ranks(const std::vector<std::string>& argv, int world,
                               const std::map<std::string, std::string>& env) {
  const int port = free_port();
  std::vector<std::unique_ptr<Child>> children;
  for (int r = 0; r < world; ++r) {
    std::map<std::string, std::string> rank_env{{"RANK", std::to_string(r)},
                                                {"LOCAL_RANK", std::to_string(r)},
                                                {"WORLD_SIZE", std::to_string(world)},
                                                {"LOCAL_WORLD_SIZE", std::to_string(world)},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", std::to_string(port)},
                                                {"OMP_NUM_THREADS", "1"}};
    for (const auto& [k, v] : env) {
      rank_env[k] = v;
    }
    children.push_back(std::make_unique<Child>(argv, rank_env));
  }
  std::vector<RankRun> results;
  static const std::regex kv(R"(([a-z_]+)=(.*))");
  for (auto& child : children) {
    RankRun r{child->wait(), {}};
    std::istringstream in(r.process.out);
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_match(line, m, kv)) {
        r.values[m[1]] = m[2];
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

namespace {

// The state letter of /proc/<pid>[/task/<tid>]/stat; '\0' when it cannot be read.
char proc_state(const std::filesystem::path& stat_path) {
  std::ifstream stat(stat_path);
  std::string st;
  std::getline(stat, st);
  const size_t close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '\0';
}

}  // namespace

std::vector<int> marked(const std::string& mark) {
  std::vector<int> pids;
  const std::string needle = "ZEUS_TEST_MARK=" + mark + '\0';
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    const std::string env((std::istreambuf_iterator<char>(environ)),
                          std::istreambuf_iterator<char>());
    const bool zombie = proc_state(entry.path() / "stat") == 'Z';
    if (!zombie && env.find(needle) != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

bool stopped_or_gone(int pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(tasks, ec), end; !ec && it != end; it.increment(ec)) {
    const char state = proc_state(it->path() / "stat");
    if (state != '\0' && state != 'T' && state != 't' && state != 'Z' && state != 'X') {
      return false;
    }
  }
  return true;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string_view(ci) == "true" || std::string_view(ci) == "1");
}

bool dead_or_zombie(int pid) {
  const char state = proc_state("/proc/" + std::to_string(pid) + "/stat");
  return state == '\0' || state == 'Z' || state == 'X';
}

std::string new_mark() {
  return std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}());
}

bool eventually(const std::function<bool()>& pred, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

std::map<int, std::map<std::string, std::string>> by_rank(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> result;
  static const std::regex kLine(R"(\[(\d+)\] ([A-Za-z_]+)=(.*))");
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kLine)) {
      result[std::stoi(m[1])][m[2]] = m[3];
    }
  }
  return result;
}

}  // namespace zeus::test
