// zeusd's costs, side by side in one run, on the fake NVML machine (4 A40s that, like the real
// driver, let only root set): (1) set-power-limit through the daemon's Unix socket against the
// same call made directly on NVML, as root (an administrator's, not leased) and as an
// unprivileged uid (a lease, journaled and fsynced before the change); (2) a setter SIGKILLed to
// its GPU back at the original limit; (3) 100 SSE subscribers to one GPU's power stream while
// the power changes 10 times a second: the daemon's CPU use and the events' lag; (4) the same
// round trip as (1) on the fake AMD SMI machine (zeusd --gpu-backend amdsmi, caps in uW at the
// library) against a direct AMD SMI call.
//   zeusd_bench [--sets 2000] [--kills 20] [--subscribers 100] [--stream-s 10]
// Needs root (the daemon does, and so does acting as another uid). Prints a table and one JSON
// line ("zeusd_bench: {...}").
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "zeus/device/amdsmi/amdsmi_gpu_set.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/zeusd/zeusd_client.h"
#include "zeus/process/child.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using zeus::process::Child;

namespace {

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

nlohmann::json read_state(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

void write_state(const fs::path& path, const nlohmann::json& state) {
  const fs::path tmp = path.string() + ".tmp-bench";
  std::ofstream(tmp) << state.dump();
  fs::rename(tmp, path);
}

fs::path setup_fake_nvml(const fs::path& dir) {
  // No history of sets in the file (the fake would rewrite thousands of entries at every set).
  nlohmann::json state{{"gpus", nlohmann::json::array()},
                       {"faults", nlohmann::json::object()},
                       {"record_history", false}};
  for (int i = 0; i < 4; ++i) {
    state["gpus"].push_back({{"name", "NVIDIA A40"},
                             {"uuid", fmt::format("GPU-bench-{}", i)},
                             {"power_mw", 150000},
                             {"energy_mj", 0},
                             {"limit_mw", 300000},
                             {"min_limit_mw", 100000},
                             {"max_limit_mw", 300000},
                             {"default_limit_mw", 300000},
                             {"instant_power", true},
                             {"energy_counter", true}});
  }
  const fs::path path = dir / "nvml-state.json";
  write_state(path, state);
  ::setenv("ZEUS_NVML_LIBRARY", ZEUS_FAKE_NVML_FULL, 1);
  ::setenv("FAKE_NVML_STATE", path.c_str(), 1);
  return path;
}

int64_t limit_mw(const fs::path& state, int gpu) {
  return read_state(state)["gpus"][static_cast<size_t>(gpu)]["limit_mw"].get<int64_t>();
}

// CPU seconds (user + system) a process has used, from /proc/<pid>/stat.
double cpu_s(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(rest)), {});
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int connect_unix(const fs::path& socket) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Options {
  int sets = 2000;
  int kills = 20;
  int subscribers = 100;
  int stream_s = 10;
};

// A child with its stdout on a pipe; `read_until` reads it until `text` appears or EOF.
struct Piped {
  Child child;
  int out_fd = -1;
  std::string out;
  Piped(const std::vector<std::string>& argv, std::map<std::string, std::string> env) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    zeus::process::ChildSpec spec;
    spec.argv = argv;
    spec.env_overrides = std::move(env);
    spec.stdout_fd = zeus::process::ChildFd::from(fds[1]);
    spec.what = "a zeusd_bench client";
    child = Child::start(spec);
    ::close(fds[1]);
    out_fd = fds[0];
  }
  ~Piped() { ::close(out_fd); }
  bool read_until(const std::string& text) {
    char buf[4096];
    while (out.find(text) == std::string::npos) {
      const ssize_t n = ::read(out_fd, buf, sizeof buf);
      if (n <= 0) {
        return false;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
};

// --client N: this process (run as another uid) times N set-power-limit calls through the daemon
// and prints the median and 99th percentile in us.
int client_mode(int n) {
  zeus::device::zeusd::ZeusdClient client(*zeus::device::zeusd::ZeusdEndpoint::from_env());
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    client.set_power_limit_mw(1, i % 2 == 0 ? 200000 : 250000);
    us.push_back(us_since(t0));
  }
  std::printf("p50=%.1f p99=%.1f\n", percentile(us, 0.5), percentile(us, 0.99));
  return 0;
}

nlohmann::json stats(const std::vector<double>& v) {
  return {{"p50", percentile(v, 0.5)},
          {"p99", percentile(v, 0.99)},
          {"max", percentile(v, 1.0)},
          {"n", v.size()}};
}

// `n` sets of GPU 0 (200 W, 250 W, ...) made directly and through the daemon, interleaved so
// that both see the same machine state; each one's times in us.
std::pair<std::vector<double>, std::vector<double>> interleaved_sets(
    int n, zeus::device::GpuSet& direct, zeus::device::zeusd::ZeusdClient& client) {
  std::vector<double> direct_us;
  std::vector<double> daemon_us;
  for (int i = 0; i < n; ++i) {
    const int64_t mw = i % 2 == 0 ? 200000 : 250000;
    auto t0 = Clock::now();
    direct.set_power_limit_mw(0, mw);
    direct_us.push_back(us_since(t0));
    t0 = Clock::now();
    client.set_power_limit_mw(0, mw);
    daemon_us.push_back(us_since(t0));
  }
  return {direct_us, daemon_us};
}

// (1) Round trips, interleaved so that both see the same machine state.
void bench_round_trips(const Options& o, const char* self, nlohmann::json& out) {
  zeus::device::nvml::NvmlGpuSet direct;  // NVML itself: never routed through zeusd
  zeus::device::zeusd::ZeusdClient client(*zeus::device::zeusd::ZeusdEndpoint::from_env());
  const auto [nvml_us, daemon_us] = interleaved_sets(o.sets, direct, client);
  out["set_direct_nvml_us"] = stats(nvml_us);
  out["set_via_zeusd_root_us"] = stats(daemon_us);
  Piped user({ZEUS_AS_UID_PATH, "61001", self, "--client", std::to_string(o.sets)}, {});
  user.read_until("\n");
  user.child.wait();
  double p50 = 0;
  double p99 = 0;
  std::sscanf(user.out.c_str(), "p50=%lf p99=%lf", &p50, &p99);
  out["set_via_zeusd_leased_us"] = {{"p50", p50}, {"p99", p99}, {"n", o.sets}};
}

// (2) A setter (another uid) lowers GPU 2, is SIGKILLed; time until the fake reads 300 W again.
void bench_kill_restore(const Options& o, const fs::path& state, nlohmann::json& out) {
  std::vector<double> ms;
  for (int i = 0; i < o.kills; ++i) {
    Piped setter({ZEUS_AS_UID_PATH, "61001", ZEUS_ZEUSD_CALL_PATH, "--hold", "POST",
                  "/gpu/set_power_limit?gpu_ids=2&block=true&power_limit_mw=150000"},
                 {});
    if (!setter.read_until("ready") || limit_mw(state, 2) != 150000) {
      throw std::runtime_error("the setter did not lower GPU 2: " + setter.out);
    }
    const auto t0 = Clock::now();
    setter.child.signal(SIGKILL);
    while (limit_mw(state, 2) != 300000) {
      if (us_since(t0) > 10e6) {
        throw std::runtime_error("GPU 2 not back within 10 s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ms.push_back(us_since(t0) / 1000);
    setter.child.wait();
  }
  out["kill_to_restored_ms"] = stats(ms);
}

// (3) Subscribers to GPU 3's power stream; the power changes every 100 ms. Lag: from writing
// the new value to each subscriber's receiving it. CPU: the daemon's, over the window, against
// the same window with nobody subscribed.
void bench_streams(const Options& o, const fs::path& state, const fs::path& socket, int daemon_pid,
                   nlohmann::json& out) {
  const auto window = std::chrono::seconds(o.stream_s);
  const double idle_cpu0 = cpu_s(daemon_pid);
  std::this_thread::sleep_for(window);
  const double idle_cpu_s = cpu_s(daemon_pid) - idle_cpu0;

  std::vector<int> fds;
  for (int i = 0; i < o.subscribers; ++i) {
    const int fd = connect_unix(socket);
    if (fd < 0) {
      throw std::runtime_error("cannot connect subscriber " + std::to_string(i));
    }
    const std::string req = "GET /gpu/stream_power?gpu_ids=3 HTTP/1.1\r\nHost: zeusd\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) < 0) {
      throw std::runtime_error("send failed");
    }
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // first events, not timed
  std::mutex mu;                                                // guards written
  std::map<int64_t, Clock::time_point> written;                 // fake power_mw -> when
  std::vector<double> lag_ms;
  size_t events = 0;
  const std::regex power_re("\"power_mw\":([0-9]+)");
  std::vector<std::string> partial(fds.size());
  bool reading = true;
  std::thread reader([&] {
    std::vector<pollfd> pfds;
    for (const int fd : fds) {
      pfds.push_back({fd, POLLIN, 0});
    }
    char buf[8192];
    while (reading) {
      if (::poll(pfds.data(), pfds.size(), 50) <= 0) {
        continue;
      }
      const auto now = Clock::now();
      for (size_t i = 0; i < pfds.size(); ++i) {
        if ((pfds[i].revents & POLLIN) == 0) {
          continue;
        }
        const ssize_t n = ::recv(pfds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) {
          continue;
        }
        partial[i].append(buf, static_cast<size_t>(n));
        for (std::smatch m; std::regex_search(partial[i], m, power_re);) {
          const int64_t reported = std::stoll(m[1]) - 1000;  // the fake's field 186 adds 1 W
          std::lock_guard lock(mu);
          if (const auto it = written.find(reported); it != written.end()) {
            lag_ms.push_back(std::chrono::duration<double, std::milli>(now - it->second).count());
            ++events;
          }
          partial[i] = m.suffix();
        }
      }
    }
  });
  const double cpu0 = cpu_s(daemon_pid);
  const auto t_end = Clock::now() + window;
  int64_t power = 160000;
  while (Clock::now() < t_end) {
    power += 1000;
    nlohmann::json s = read_state(state);
    s["gpus"][3]["power_mw"] = power;
    {
      std::lock_guard lock(mu);
      written[power] = Clock::now();  // before the write: the lag includes replacing the file
    }
    write_state(state, s);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double busy_cpu_s = cpu_s(daemon_pid) - cpu0;
  reading = false;
  reader.join();
  for (const int fd : fds) {
    ::close(fd);
  }
  const size_t changes = written.size();
  out["streams"] = {{"subscribers", o.subscribers},
                    {"changes", changes},
                    {"events_expected", changes * fds.size()},
                    {"events_received", events},
                    {"lag_ms", stats(lag_ms)},
                    {"daemon_cpu_percent", 100 * busy_cpu_s / o.stream_s},
                    {"daemon_cpu_percent_idle", 100 * idle_cpu_s / o.stream_s}};
}

}  // namespace

// (4) zeusd over AMD SMI: a second daemon on the fake libamd_smi, timed against direct calls.
void bench_amd_round_trips(const Options& o, const fs::path& dir, nlohmann::json& out) {
  nlohmann::json state{{"gpus", nlohmann::json::array()},
                       {"faults", nlohmann::json::object()},
                       {"record_history", false}};
  for (int i = 0; i < 4; ++i) {
    state["gpus"].push_back({{"name", "AMD Instinct MI300X"},
                             {"uuid", fmt::format("GPU-amdbench{}", i)},
                             {"hip_id", i},
                             {"power_w", 150},
                             {"cap_uw", 300'000'000},
                             {"min_cap_uw", 100'000'000},
                             {"max_cap_uw", 300'000'000},
                             {"default_cap_uw", 300'000'000}});
  }
  const fs::path path = dir / "amdsmi-state.json";
  write_state(path, state);
  ::setenv("ZEUS_AMDSMI_LIBRARY", ZEUS_FAKE_AMDSMI, 1);
  ::setenv("FAKE_AMDSMI_STATE", path.c_str(), 1);
  const fs::path socket = dir / "zeusd-amd.sock";
  zeus::process::ChildSpec spec;
  spec.argv = {ZEUSD_PATH,      "serve",       "--socket-path",
               socket.string(), "--state-dir", (dir / "state-amd").string(),
               "--log-level",   "warn",        "--gpu-backend",
               "amdsmi"};
  spec.what = "zeusd (AMD SMI)";
  Child daemon = Child::start(spec);
  for (int i = 0; i < 500 && !fs::exists(socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string nvml_socket = std::getenv("ZEUSD_SOCK_PATH");
  ::setenv("ZEUSD_SOCK_PATH", socket.c_str(), 1);
  zeus::device::amdsmi::AmdsmiGpuSet direct;  // AMD SMI itself: never routed through zeusd
  zeus::device::zeusd::ZeusdClient client(*zeus::device::zeusd::ZeusdEndpoint::from_env());
  ::setenv("ZEUSD_SOCK_PATH", nvml_socket.c_str(), 1);
  const auto [direct_us, daemon_us] = interleaved_sets(o.sets, direct, client);
  if (read_state(path)["gpus"][0]["cap_uw"].get<int64_t>() != 250'000'000) {
    throw std::runtime_error("the AMD fake's cap is not the last one set (250 W in uW)");
  }
  out["set_direct_amdsmi_us"] = stats(direct_us);
  out["set_via_zeusd_amdsmi_us"] = stats(daemon_us);
  daemon.stop(std::chrono::seconds(5));
}

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--client") {
      return client_mode(v);
    }
    (flag == "--sets"          ? o.sets
     : flag == "--kills"       ? o.kills
     : flag == "--subscribers" ? o.subscribers
                               : o.stream_s) = v;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr,
                 "zeusd_bench: run as root (zeusd needs it, and so does acting as another uid)\n");
    return 2;
  }
  char tmpl[] = "/tmp/zeusd-bench-XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  const fs::path state = setup_fake_nvml(dir);
  const fs::path socket = dir / "zeusd.sock";
  zeus::process::ChildSpec spec;
  spec.argv = {ZEUSD_PATH,      "serve",       "--socket-path",
               socket.string(), "--state-dir", (dir / "state").string(),
               "--log-level",   "warn"};
  spec.what = "zeusd";
  Child daemon = Child::start(spec);
  for (int i = 0; i < 500 && !fs::exists(socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::setenv("ZEUSD_SOCK_PATH", socket.c_str(), 1);
  nlohmann::json out;
  try {
    bench_round_trips(o, argv[0], out);
    bench_kill_restore(o, state, out);
    bench_streams(o, state, socket, daemon.pid(), out);
    bench_amd_round_trips(o, dir, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zeusd_bench: %s\n", e.what());
    return 1;
  }
  daemon.stop(std::chrono::seconds(5));
  fs::remove_all(dir);

  const auto& s = out["streams"];
  std::printf("set-power-limit round trip, us (p50 / p99), %d each, interleaved:\n", o.sets);
  std::printf("  direct NVML call (fake, root)        %8.1f / %8.1f\n",
              out["set_direct_nvml_us"]["p50"].get<double>(),
              out["set_direct_nvml_us"]["p99"].get<double>());
  std::printf("  through zeusd, root (not leased)     %8.1f / %8.1f\n",
              out["set_via_zeusd_root_us"]["p50"].get<double>(),
              out["set_via_zeusd_root_us"]["p99"].get<double>());
  std::printf("  through zeusd, uid 61001 (leased)    %8.1f / %8.1f\n",
              out["set_via_zeusd_leased_us"]["p50"].get<double>(),
              out["set_via_zeusd_leased_us"]["p99"].get<double>());
  std::printf("  direct AMD SMI call (fake, root)     %8.1f / %8.1f\n",
              out["set_direct_amdsmi_us"]["p50"].get<double>(),
              out["set_direct_amdsmi_us"]["p99"].get<double>());
  std::printf("  through zeusd on AMD SMI, root       %8.1f / %8.1f\n",
              out["set_via_zeusd_amdsmi_us"]["p50"].get<double>(),
              out["set_via_zeusd_amdsmi_us"]["p99"].get<double>());
  std::printf("setter SIGKILLed -> GPU back, ms (p50 / max, %d kills): %.1f / %.1f\n", o.kills,
              out["kill_to_restored_ms"]["p50"].get<double>(),
              out["kill_to_restored_ms"]["max"].get<double>());
  std::printf(
      "%d SSE subscribers, %d s, %zu changes: %zu of %zu events, lag ms p50 %.1f p99 %.1f max "
      "%.1f; daemon CPU %.1f%% (idle %.1f%%)\n",
      o.subscribers, o.stream_s, s["changes"].get<size_t>(), s["events_received"].get<size_t>(),
      s["events_expected"].get<size_t>(), s["lag_ms"]["p50"].get<double>(),
      s["lag_ms"]["p99"].get<double>(), s["lag_ms"]["max"].get<double>(),
      s["daemon_cpu_percent"].get<double>(), s["daemon_cpu_percent_idle"].get<double>());
  std::printf("zeusd_bench: %s\n", out.dump().c_str());
  return 0;
}
