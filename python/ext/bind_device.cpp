// zeus_cpp.device's engine: the shared GPU set (Gpus), the limit keeper an optimizer changes
// limits through, and the watchdog process that puts them back when that process dies.
#include <fcntl.h>
#include <poll.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "gpus.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/discovery.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/launch/guardian.h"
#include "zeus/process/child.h"

namespace py = pybind11;

namespace zeus::python {

Gpus::Gpus(const GpusOptions& options) {
  device::OpenGpuSetOptions open;
  open.sim_start_busy = true;  // a simulated GPU draws its training power, as if in use
  open.sim_clock = options.sim_virtual_clock ? device::SimClock::kVirtual : device::SimClock::kReal;
  set_ = std::shared_ptr<device::GpuSet>(device::open_gpu_set(options.locator, open));
  sim_ = dynamic_cast<device::sim::SimGpuSet*>(set_.get());
  virtual_clock_ = sim_ != nullptr && options.sim_virtual_clock;
}

double Gpus::sim_now_s() const {
  std::chrono::nanoseconds latest{0};
  for (int g = 0; g < sim_->count(); ++g) {
    latest = std::max(latest, sim_->now(g));
  }
  return std::chrono::duration<double>(latest).count();
}

void Gpus::run_steps(int64_t n) {
  if (!virtual_clock_ || n <= 0) {
    return;
  }
  for (int g = 0; g < sim_->count(); ++g) {
    sim_->run_iterations(g, n);
  }
}

double Gpus::run_gpu_steps(int gpu, int64_t n) {
  if (!virtual_clock_ || n <= 0) {
    return 0.0;
  }
  return std::chrono::duration<double>(sim_->run_iterations(gpu, n)).count();
}

double Gpus::sim_gpu_now_s(int gpu) const {
  return virtual_clock_ ? std::chrono::duration<double>(sim_->now(gpu)).count() : 0.0;
}

void Gpus::sim_idle_until_s(int gpu, double t_s) {
  if (!virtual_clock_) {
    return;
  }
  const auto now = sim_->now(gpu);
  const auto t = std::chrono::nanoseconds{static_cast<int64_t>(t_s * 1e9)};
  if (t > now) {
    sim_->idle(gpu, t - now);
    sim_->set_busy(gpu, true);  // the optimizer's simulated GPUs draw training power between
  }
}

std::string Gpus::through_zeusd() const {
  return set_->limits_through();
}

namespace {

// One line from `fd` within `timeout`, or std::nullopt (EOF, timeout).
std::optional<std::string> read_line(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return std::nullopt;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) {
      return std::nullopt;
    }
    if (c == '\n') {
      return line;
    }
    line.push_back(c);
  }
}

struct Pipe {
  UniqueFd read, write;
  Pipe() {
    int fds[2];
    check_posix(::pipe2(fds, O_CLOEXEC), "pipe2", "the watchdog's pipe");
    read = UniqueFd(fds[0]);
    write = UniqueFd(fds[1]);
  }
};

}  // namespace

// The power limits one optimizer changes, through a PowerLimitGuard (signals, return) and its
// journal, watched by a process of its own that restores the journal when this process ends
// without restoring (SIGKILL, a crash): Note [limit watchdog] in docs/python.md.
class LimitKeeper {
 public:
  LimitKeeper(std::shared_ptr<Gpus> gpus, const std::string& journal_path,
              std::optional<std::vector<std::string>> watchdog_argv)
      : gpus_(std::move(gpus)),
        journal_path_(journal_path),
        watchdog_argv_(std::move(watchdog_argv)) {
    device::PowerLimitGuardOptions options;
    options.journal_path = journal_path_;
    guard_ = std::make_unique<device::PowerLimitGuard>(gpus_->set(), options);
  }
  ~LimitKeeper() { close(); }
  LimitKeeper(const LimitKeeper&) = delete;
  LimitKeeper& operator=(const LimitKeeper&) = delete;

  void set_power_limit_mw(int gpu, int64_t limit_mw) {
    gpus_->set().validate_power_limit_mw(gpu, limit_mw);
    if (watchdog_argv_ && !watchdog_.started()) {
      start_watchdog();
    }
    guard_->set_power_limit_mw(gpu, limit_mw);
  }

  // Puts the originals back (journal removed), then lets the watchdog go.
  void close() {
    if (guard_) {
      try {
        guard_->restore();
      } catch (const std::exception& e) {
        logger().error(
            "restoring the power limits: {} (the journal {} is kept; zeus "
            "restore-limits --journal {} restores it)",
            e.what(), journal_path_.string(), journal_path_.string());
      }
    }
    if (watchdog_.running()) {
      try {
        write_all(control_.get(), "D\n", "telling the watchdog the limits are back", "");
      } catch (const std::exception&) {
      }
      if (!watchdog_.wait_for(std::chrono::seconds(2))) {
        (void)watchdog_.stop(std::chrono::milliseconds(200));
      }
    }
  }

  std::map<int, int64_t> originals() const { return guard_->originals(); }
  std::optional<int> watchdog_pid() const {
    return watchdog_.running() ? std::optional<int>(watchdog_.pid()) : std::nullopt;
  }

 private:
  // Started before the first change, and ready (watching this process) when it returns; a
  // watchdog that does not come up is a warning: the journal still lets `zeus run` or the next
  // job restore.
  void start_watchdog() {
    Pipe control, ready;
    process::ChildSpec spec;
    spec.argv = *watchdog_argv_;
    spec.new_session = true;  // a signal to this job's group or terminal must not reach it
    spec.stdin_fd = process::ChildFd::from(control.read.get());
    spec.stdout_fd = process::ChildFd::from(ready.write.get());
    spec.what = "the power-limit watchdog";
    try {
      watchdog_ = process::Child::start(spec);
    } catch (const Error& e) {
      logger().warn(
          "the power-limit watchdog did not start ({}); after a SIGKILL, the journal "
          "{} is restored by zeus run or the next job",
          e.what(), journal_path_.string());
      return;
    }
    ready.write.reset();
    control_ = std::move(control.write);
    const auto line = read_line(ready.read.get(), std::chrono::seconds(20));
    if (!line || *line != "ready") {
      logger().warn(
          "the power-limit watchdog (pid {}) did not report ready; after a SIGKILL, "
          "the journal {} is restored by zeus run or the next job",
          watchdog_.pid(), journal_path_.string());
    }
  }

  std::shared_ptr<Gpus> gpus_;
  std::filesystem::path journal_path_;
  std::optional<std::vector<std::string>> watchdog_argv_;
  std::unique_ptr<device::PowerLimitGuard> guard_;
  process::Child watchdog_;
  UniqueFd control_;
};

void bind_device(py::module_& m) {
  py::class_<Gpus, std::shared_ptr<Gpus>>(m, "Gpus")
      .def(py::init([](const std::string& locator, bool sim_virtual_clock) {
             return std::make_shared<Gpus>(GpusOptions{locator, sim_virtual_clock});
           }),
           py::arg("locator"), py::arg("sim_virtual_clock") = false)
      .def_property_readonly("count", [](Gpus& g) { return g.set().count(); })
      .def_property_readonly("locator", [](Gpus& g) { return g.set().locator(); })
      .def_property_readonly("is_sim", [](Gpus& g) { return g.sim() != nullptr; })
      .def_property_readonly("virtual_clock", &Gpus::virtual_clock)
      .def_property_readonly("through_zeusd", &Gpus::through_zeusd)
      .def("sim_now_s", &Gpus::sim_now_s)
      .def("run_steps", &Gpus::run_steps, py::arg("n"))
      .def("run_gpu_steps", &Gpus::run_gpu_steps, py::arg("gpu"), py::arg("n"))
      .def("sim_gpu_now_s", &Gpus::sim_gpu_now_s, py::arg("gpu"))
      .def("sim_idle_until_s", &Gpus::sim_idle_until_s, py::arg("gpu"), py::arg("t_s"))
      .def("sim_set_slowdown",
           [](Gpus& g, int i, double slowdown) {
             if (g.sim() == nullptr) {
               throw ConfigError("only a simulated GPU can be slowed down");
             }
             g.sim()->set_slowdown(i, slowdown);
           })
      .def("sim_idle_power_w",
           [](Gpus& g, int i) -> std::optional<double> {
             return g.sim() != nullptr ? std::optional(g.sim()->idle_power_w(i)) : std::nullopt;
           })
      .def("name", [](Gpus& g, int i) { return g.set().name(i); })
      .def("uuid", [](Gpus& g, int i) { return g.set().uuid(i); })
      .def("describe", [](Gpus& g, int i) { return g.set().describe(i); })
      .def("power_mw", [](Gpus& g, int i) { return g.set().power_mw(i); })
      .def("has_energy_counter", [](Gpus& g, int i) { return g.set().has_energy_counter(i); })
      .def("energy_mj", [](Gpus& g, int i) { return g.set().energy_mj(i); })
      .def("temperature_c", [](Gpus& g, int i) { return g.set().read(i).temperature_c; })
      .def("power_limit_mw", [](Gpus& g, int i) { return g.set().power_limit_mw(i); })
      .def("power_limit_constraints_mw",
           [](Gpus& g, int i) {
             const auto r = g.set().power_limit_constraints_mw(i);
             return std::make_pair(r.min_mw, r.max_mw);
           })
      .def("default_power_limit_mw",
           [](Gpus& g, int i) { return g.set().default_power_limit_mw(i); })
      .def("set_power_limit_mw",
           [](Gpus& g, int i, int64_t mw) { g.set().set_power_limit_mw(i, mw); })
      .def("persistence_mode", [](Gpus& g, int i) { return g.set().persistence_mode(i); })
      .def("set_persistence_mode",
           [](Gpus& g, int i, bool on) { g.set().set_persistence_mode(i, on); })
      .def("set_gpu_locked_clocks", [](Gpus& g, int i, uint32_t lo,
                                       uint32_t hi) { g.set().set_gpu_locked_clocks(i, lo, hi); })
      .def("reset_gpu_locked_clocks", [](Gpus& g, int i) { g.set().reset_gpu_locked_clocks(i); })
      .def("set_mem_locked_clocks", [](Gpus& g, int i, uint32_t lo,
                                       uint32_t hi) { g.set().set_mem_locked_clocks(i, lo, hi); })
      .def("reset_mem_locked_clocks", [](Gpus& g, int i) { g.set().reset_mem_locked_clocks(i); });

  py::class_<LimitKeeper>(m, "LimitKeeper")
      .def(py::init<std::shared_ptr<Gpus>, const std::string&,
                    std::optional<std::vector<std::string>>>(),
           py::arg("gpus"), py::arg("journal_path"), py::arg("watchdog_argv"))
      .def("set_power_limit_mw", &LimitKeeper::set_power_limit_mw, py::arg("gpu"),
           py::arg("limit_mw"), py::call_guard<py::gil_scoped_release>())
      .def("close", &LimitKeeper::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("originals", &LimitKeeper::originals)
      .def_property_readonly("watchdog_pid", &LimitKeeper::watchdog_pid);

  // The watchdog (zeus_cpp/_watchdog.py) is the guardian program zeus run's sentinel is: one
  // body, started by exec (Note [the guardian] in launch/guardian.h).
  m.def(
      "guardian_main",
      [](const std::vector<std::string>& args) {
        return launch::guardian_main(launch::parse_guardian_args(args));
      },
      py::arg("args"), py::call_guard<py::gil_scoped_release>());
  // The run contract's names for an optimizer's own journal, so that the launcher settling them
  // (launch/journals.cpp) and the optimizer writing them agree by construction.
  m.def("process_journal_name", &contract::process_journal_name, py::arg("host"), py::arg("pid"));
  // Every journal in `dir` whose owner is gone (any node's, any optimizer's) put back, as the
  // launcher does (launch/journals.cpp): what was done, a line each, for the caller's log.
  m.def(
      "settle_gone_journals",
      [](const std::string& dir) {
        std::vector<std::string> lines;
        device::settle_gone_journals(contract::list_journals(dir),
                                     [&](const std::string& line) { lines.push_back(line); });
        return lines;
      },
      py::arg("dir"), py::call_guard<py::gil_scoped_release>());
}

}  // namespace zeus::python
