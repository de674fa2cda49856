#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "cli.h"
#include "monitor_serve.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/power.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/common/units.h"
#include "zeus/device/discovery.h"
#include "zeus/monitor/energy_monitor.h"
#include "zeus/monitor/power_monitor.h"

namespace zeus::cli {
namespace {

using monitor::MonitoredDevice;
using monitor::PowerMonitor;
using monitor::PowerSample;

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  if (text == "all") {
    return out;
  }
  for (const std::string& item : split(text, ',')) {
    const auto index = parse_number<int>(item);
    if (!index || *index < 0) {
      throw ConfigError(
          fmt::format("--gpus '{}': '{}' is not a GPU index; write all, none, or indices like 0,1",
                      text, item));
    }
    if (std::find(out.begin(), out.end(), *index) != out.end()) {
      throw ConfigError(fmt::format("--gpus '{}': GPU {} is listed twice", text, *index));
    }
    out.push_back(*index);
  }
  return out;
}

// A log file written a whole line at a time (across short writes and EINTR), so an
// interrupted run leaves whole lines only.
class LineWriter {
 public:
  explicit LineWriter(std::filesystem::path path) : path_(std::move(path)) {
    fd_ = UniqueFd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd_.get() < 0) {
      throw_posix_error("opening output", path_.string(), errno);
    }
  }
  void write_line(const std::string& line) {
    write_all(fd_.get(), line, "writing", path_.string());
  }
  void remove() { ::unlink(path_.c_str()); }

 private:
  std::filesystem::path path_;
  UniqueFd fd_;
};

// Where the samples go: per-device CSVs (through PowerMonitor), or one wide CSV / JSONL file.
struct OutputPlan {
  std::vector<std::filesystem::path> csv_paths;
  std::optional<std::filesystem::path> single_file;
  bool wide_csv = false;
};

OutputPlan plan_output(const MonitorCommandOptions& options,
                       const std::vector<MonitoredDevice>& devices) {
  OutputPlan plan;
  if (options.out.empty()) {
    return plan;
  }
  const std::filesystem::path out(options.out);
  std::error_code ec;
  const bool as_dir = options.out.back() == '/' || std::filesystem::is_directory(out, ec);
  if (as_dir) {
    std::filesystem::create_directories(out, ec);
    if (ec || ::access(out.c_str(), W_OK) != 0) {
      throw ConfigError(
          fmt::format("--out '{}': cannot create or write to this directory{}; "
                      "choose a writable path",
                      options.out, ec ? " (" + ec.message() + ")" : ""));
    }
    if (options.format == "jsonl") {
      plan.single_file = out / "power.jsonl";
    } else {
      for (const auto& dev : devices) {
        plan.csv_paths.push_back(out / (dev.label + ".power.csv"));
      }
    }
    return plan;
  }
  const std::filesystem::path parent = out.parent_path().empty() ? "." : out.parent_path();
  if (!std::filesystem::is_directory(parent, ec)) {
    throw ConfigError(fmt::format("--out '{}': directory '{}' does not exist; create it first",
                                  options.out, parent.string()));
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw ConfigError(fmt::format("--out '{}': directory '{}' is not writable ({})", options.out,
                                  parent.string(), errno_string(errno)));
  }
  if (options.format == "csv" && devices.size() == 1) {
    plan.csv_paths.push_back(out);
  } else {
    plan.single_file = out;
    plan.wide_csv = options.format == "csv";
  }
  return plan;
}

std::string format_row(const PowerSample& sample, const std::vector<MonitoredDevice>& devices,
                       bool wide_csv) {
  const std::string time = format_utc_ns(sample.wall_time);
  if (wide_csv) {
    std::string line = time;
    for (const auto& p : sample.power_mw) {
      line += p ? fmt::format(",{}", *p) : std::string(",");
    }
    return line + "\n";
  }
  // JSONL through the JSON library: labels and values escaped as JSON wants.
  nlohmann::ordered_json row;
  row["time"] = time;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string key = devices[i].label + "_mw";
    row[key] = sample.power_mw[i] ? nlohmann::ordered_json(*sample.power_mw[i])
                                  : nlohmann::ordered_json(nullptr);
  }
  return row.dump() + "\n";
}

struct DeviceSummary {
  std::string label;
  std::string name;
  std::optional<double> energy_j;
  std::optional<double> peak_w;
  std::string source;
  // With a counter: the trapezoid integral of the same window's power samples, to compare.
  std::optional<double> integral_j;
};

void print_summary(std::ostream& out, const std::string& where, std::chrono::nanoseconds elapsed,
                   size_t samples, std::chrono::nanoseconds interval,
                   const std::vector<DeviceSummary>& rows) {
  const double seconds = to_seconds(elapsed);
  out << fmt::format("zeus monitor: {:.2f} s on {}, {} samples every {}\n", seconds, where, samples,
                     format_duration(interval));
  out << fmt::format("{:<7} {:<34} {:>11} {:>11} {:>9} {:>9}  {}\n", "device", "name", "energy (J)",
                     "energy (Wh)", "avg (W)", "peak (W)", "energy from");
  double total_j = 0;
  const auto num = [](std::optional<double> v, int precision) {
    return v ? fmt::format("{:.{}f}", *v, precision) : std::string("n/a");
  };
  for (const auto& row : rows) {
    std::optional<double> avg;
    std::optional<double> wh;
    if (row.energy_j) {
      total_j += *row.energy_j;
      wh = *row.energy_j / 3600.0;
      if (seconds > 0) {
        avg = *row.energy_j / seconds;
      }
    }
    out << fmt::format("{:<7} {:<34} {:>11} {:>11} {:>9} {:>9}  {}\n", row.label, row.name,
                       num(row.energy_j, 1), num(wh, 4), num(avg, 1), num(row.peak_w, 1),
                       row.source);
  }
  if (rows.size() > 1) {
    out << fmt::format("{:<7} {:<34} {:>11.1f} {:>11.4f}\n", "total", "", total_j,
                       total_j / 3600.0);
  }
  for (const auto& row : rows) {
    if (row.integral_j && row.energy_j && *row.energy_j > 0) {
      out << fmt::format(
          "{}: {} {:.1f} J vs the integral of its {} power samples {:.1f} J ({:+.2f}%)\n",
          row.label, row.source, *row.energy_j, samples, *row.integral_j,
          100.0 * (*row.integral_j - *row.energy_j) / *row.energy_j);
    }
  }
}

int list_backends(std::ostream& out) {
  auto statuses = device::discover_gpu_backends();
  statuses.push_back(device::discover_cpu_backend());
  for (const auto& s : statuses) {
    out << fmt::format("{:<5} {:<12} {}\n", s.backend, s.available ? "available" : "unavailable",
                       s.reason);
  }
  return kExitOk;
}

// What a run monitors and where its samples go, checked before anything is started.
struct MonitorSetup {
  std::unique_ptr<device::GpuSet> gpus;
  std::unique_ptr<device::CpuSet> cpus;
  std::unique_ptr<PowerMonitor> power;
  std::unique_ptr<LineWriter> writer;  // the one-file formats' (wide CSV, JSONL)
};

// Opens the devices and the outputs. Throws ConfigError (a usage error) before any file is
// created when a flag is wrong; a file it created is removed when a later step fails.
MonitorSetup set_up(const MonitorCommandOptions& options) {
  MonitorSetup s;
  if (options.interval < monitor::kMinPeriod) {
    throw ConfigError(fmt::format("--interval {} is below the minimum {}",
                                  format_duration(options.interval),
                                  format_duration(monitor::kMinPeriod)));
  }
  if (options.format != "csv" && options.format != "jsonl") {
    throw ConfigError(fmt::format("--format '{}': use csv or jsonl", options.format));
  }
  monitor::PowerMonitorOptions monitor_options;
  monitor_options.period = options.interval;
  if (options.gpus != "none") {
    monitor_options.gpus = parse_gpu_list(options.gpus);
    device::OpenGpuSetOptions open_options;
    open_options.sim_clock = device::SimClock::kReal;
    open_options.sim_start_busy = true;  // show a GPU running its workload
    s.gpus = device::open_gpu_set(options.device, open_options);
    if (s.gpus->count() == 0) {
      throw ConfigError(fmt::format("{} shows no GPU to this process (CUDA_VISIBLE_DEVICES?)",
                                    s.gpus->locator()));
    }
  }
  if (options.cpus == "all") {
    s.cpus = device::open_cpu_set();
    monitor_options.cpus = s.cpus.get();
  } else if (!options.cpus.empty()) {
    throw ConfigError(fmt::format("--cpus '{}': only 'all' is supported", options.cpus));
  }
  if (!s.gpus && !s.cpus) {
    throw ConfigError("--gpus none without --cpus all leaves nothing to monitor");
  }
  // Validate devices before any file is created: the monitor's constructor checks indices.
  s.power = std::make_unique<PowerMonitor>(s.gpus.get(), monitor_options);
  const OutputPlan plan = plan_output(options, s.power->devices());
  if (plan.csv_paths.empty() && !plan.single_file) {
    return s;
  }
  monitor_options.csv_paths = plan.csv_paths;
  if (plan.single_file) {
    s.writer = std::make_unique<LineWriter>(*plan.single_file);
    const auto devices = s.power->devices();
    const bool wide = plan.wide_csv;
    if (wide) {
      std::string header = "Time";
      for (const auto& dev : devices) {
        header += "," + dev.label;
      }
      s.writer->write_line(header + "\n");
    }
    monitor_options.on_sample = [w = s.writer.get(), devices, wide](const PowerSample& sample) {
      w->write_line(format_row(sample, devices, wide));
    };
  }
  s.power.reset();
  try {
    s.power = std::make_unique<PowerMonitor>(s.gpus.get(), monitor_options);
  } catch (...) {
    if (s.writer) {
      s.writer->remove();
    }
    throw;
  }
  return s;
}

// Samples until the duration ends, a signal comes, or a device fails (with no exporter to keep
// serving the others); with --live, one status line refreshed in place.
void sample_until_done(const MonitorCommandOptions& options, PowerMonitor& power, bool serving,
                       std::ostream& out, std::ostream& err) {
  const auto& devices = power.devices();
  const auto start = std::chrono::steady_clock::now();
  SignalPipe signals({SIGINT, SIGTERM});
  power.start();
  constexpr std::chrono::nanoseconds kErrorCheck = std::chrono::milliseconds(100);
  const auto refresh =
      std::max<std::chrono::nanoseconds>(options.interval, std::chrono::milliseconds(250));
  bool told_serving_on = false;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    std::chrono::nanoseconds wait = options.live ? refresh : std::chrono::nanoseconds(-1);
    if (options.duration.count() > 0) {
      const auto left = start + options.duration - now;
      if (left <= std::chrono::nanoseconds(0)) {
        break;
      }
      wait = wait.count() < 0 ? left : std::min(wait, std::chrono::nanoseconds(left));
    }
    // Wake at least every 100 ms to notice a sampling error promptly.
    wait = wait.count() < 0 ? kErrorCheck : std::min(wait, kErrorCheck);
    if (signals.wait_for(wait) != 0) {
      break;
    }
    // A device that fails ends the measurement, but not an exporter: the other devices' metrics
    // (and the failing one's error counter) are served on until the duration or a signal.
    if (power.error()) {
      if (!serving) {
        break;
      }
      if (!told_serving_on) {
        err << "zeus monitor: sampling stopped (a device failed); serving the metrics on until "
               "the duration ends or Ctrl-C\n"
            << std::flush;
        told_serving_on = true;
      }
    }
    if (options.live) {
      const auto timeline = power.timeline();
      if (!timeline.empty()) {
        std::string line = fmt::format("\r[{:7.1f} s]", to_seconds(now - start));
        for (size_t i = 0; i < devices.size(); ++i) {
          const auto& p = timeline.back().power_mw[i];
          line += p ? fmt::format("  {} {:7.1f} W", devices[i].label, mw_to_w(*p))
                    : fmt::format("  {}     n/a", devices[i].label);
        }
        out << line << std::flush;
      }
    }
  }
  power.stop();
  if (options.live) {
    out << "\n";
  }
}

// One summary row per device: its energy (counter, else the samples' integral), its peak.
std::vector<DeviceSummary> summarize(const MonitorSetup& s,
                                     const std::vector<PowerSample>& timeline,
                                     const monitor::Measurement& measured) {
  const auto& devices = s.power->devices();
  std::vector<DeviceSummary> rows;
  size_t gpu = 0;
  size_t cpu = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    const MonitoredDevice& dev = devices[i];
    const bool is_gpu = dev.kind == MonitoredDevice::Kind::kGpu;
    const size_t k = is_gpu ? gpu++ : cpu++;
    DeviceSummary row{dev.label, is_gpu ? s.gpus->name(dev.index) : s.cpus->name(dev.index),
                      std::nullopt, std::nullopt, ""};
    for (const auto& sample : timeline) {
      if (sample.power_mw[i]) {
        row.peak_w = std::max(row.peak_w.value_or(0.0), mw_to_w(*sample.power_mw[i]));
      }
    }
    const auto source = is_gpu ? measured.gpu_source[k] : measured.cpu_source[k];
    const bool has_samples = timeline.size() > 1;
    if (source == monitor::EnergySource::kCounter) {
      row.energy_j = is_gpu ? measured.gpu_energy_j[k] : measured.cpu_energy_j[k];
      row.source = is_gpu ? "energy counter" : "RAPL counter";
      row.integral_j = is_gpu ? measured.gpu_integral_j[k] : measured.cpu_integral_j[k];
    } else if (has_samples) {
      row.energy_j = is_gpu ? measured.gpu_energy_j[k] : measured.cpu_energy_j[k];
      row.source = "power samples (trapezoid)";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

// The sequence: set up (usage errors), the exporter, the energy window, sampling, the summary.
int run_monitor(const MonitorCommandOptions& options, std::ostream& out, std::ostream& err) {
  const auto fail = [&err](int code, std::string_view message) {
    err << "zeus monitor: error: " << message << "\n";
    return code;
  };
  if (options.list) {
    return list_backends(out);
  }
  MonitorSetup s;
  try {
    s = set_up(options);
  } catch (const Error& e) {
    return fail(kExitUsage, e.what());
  }
  std::unique_ptr<MetricsServe> serving;
  if (!options.serve.empty()) {
    try {
      // The exporter's own sampler: at the monitor's interval, at most ten times a second.
      serving = serve_metrics(
          {.address = options.serve,
           .period =
               std::max(std::chrono::duration_cast<std::chrono::milliseconds>(options.interval),
                        std::chrono::milliseconds(100)),
           .kubelet_socket = options.kubelet_socket,
           .token_file = options.metrics_token_file},
          s.gpus.get(), s.cpus.get());
      err << "zeus monitor: serving http://" << serving->address() << "/metrics\n" << std::flush;
    } catch (const Error& e) {
      if (s.writer) {
        s.writer->remove();
      }
      return fail(kExitUsage, e.what());
    }
  }
  // Energy over the run: each device's counter where it has one, else the integral of the
  // samples (and the samples where a counter fails at the end), compared with the samples.
  std::unique_ptr<monitor::EnergyMonitor> energy;
  try {
    monitor::EnergyMonitorOptions energy_options;
    for (const auto& dev : s.power->devices()) {
      if (dev.kind == MonitoredDevice::Kind::kGpu) {
        energy_options.gpus.push_back(dev.index);
      }
    }
    energy_options.cpus = s.cpus.get();
    energy_options.timeline = s.power.get();
    energy = std::make_unique<monitor::EnergyMonitor>(s.gpus.get(), energy_options);
    energy->begin_window("monitor");
  } catch (const Error& e) {
    return fail(kExitFailure, e.what());
  }
  sample_until_done(options, *s.power, serving != nullptr, out, err);
  const auto timeline = s.power->timeline();
  // After a sampling error the measurement ends with the last sample: nothing is known after it.
  const auto end = s.power->error() && !timeline.empty() ? timeline.back().time
                                                         : std::chrono::steady_clock::now();
  monitor::Measurement measured;
  try {
    measured = energy->end_window("monitor", end);
  } catch (const Error& e) {
    return fail(kExitFailure, e.what());
  }
  // The window spans the counter reads at both ends, so the average never exceeds the truth.
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(measured.elapsed);
  print_summary(out, s.gpus ? s.gpus->locator() : std::string("rapl"), elapsed, timeline.size(),
                options.interval, summarize(s, timeline, measured));
  if (const auto error = s.power->error()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return fail(kExitFailure,
                  fmt::format("sampling stopped early: {}; the log holds the samples taken "
                              "before",
                              e.what()));
    }
  }
  return kExitOk;
}

}  // namespace zeus::cli
