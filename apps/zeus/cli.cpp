#include "cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <ostream>

#include "zeus/common/errors.h"
#include "zeus/common/units.h"
#include "zeus/config.h"

namespace zeus::cli {
namespace {

// Flags take durations as "100ms", "10s": parsed by the project's one parser.
void add_duration(CLI::App* app, const std::string& flag, std::chrono::nanoseconds& target,
                  const std::string& help) {
  app->add_option_function<std::string>(
         flag, [&target, flag](const std::string& text) { target = parse_duration(text, flag); },
         help)
      ->type_name("DURATION");
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            bool stdout_is_tty) {
  CLI::App app{"zeus: measure and cut the energy of deep-learning training", "zeus"};
  app.set_version_flag("--version", std::string("zeus ") + ZEUS_VERSION);
  app.require_subcommand(1);

  MonitorCommandOptions monitor;
  CLI::App* monitor_cmd =
      app.add_subcommand("monitor", "Sample GPU (and CPU) power; print energy on exit");
  monitor_cmd->add_option("--gpus", monitor.gpus, "GPUs: all, none, or indices like 0,1")
      ->capture_default_str();
  monitor_cmd->add_option("--cpus", monitor.cpus, "CPU packages to measure with RAPL: all");
  add_duration(monitor_cmd, "--interval", monitor.interval,
               "Sampling period, at least 5ms (default 100ms)");
  add_duration(monitor_cmd, "--duration", monitor.duration,
               "How long to run; 0 (default) runs until Ctrl-C");
  monitor_cmd->add_option("--out", monitor.out,
                          "Log FILE, or DIR for one gpu<i>.power.csv per device");
  monitor_cmd->add_option("--format", monitor.format, "Log format: csv or jsonl")
      ->check(CLI::IsMember({"csv", "jsonl"}))
      ->capture_default_str();
  monitor_cmd
      ->add_option("--device", monitor.device,
                   "auto, nvml, or sim:<gpu>[:<workload>[:<batch size>]]")
      ->capture_default_str();
  monitor_cmd->add_flag("--list", monitor.list,
                        "List the device backends and why each is (un)available");

  SimulateCommandOptions simulate;
  CLI::App* simulate_cmd = app.add_subcommand(
      "simulate", "Replay Zeus over the paper's measured traces and compare with the Default");
  simulate_cmd->add_option("--gpu", simulate.gpu, "v100, a40, p100, rtx6000 or all")
      ->capture_default_str();
  simulate_cmd
      ->add_option("--workload", simulate.workload,
                   "cifar100, imagenet, librispeech, movielens-1m, sentiment140, squad "
                   "or all")
      ->capture_default_str();
  simulate_cmd->add_option("--seeds", simulate.seeds, "Seeds: 1..10, 1,2,3 or 7")
      ->capture_default_str();
  simulate_cmd->add_option("--eta", simulate.eta, "Energy vs time knob in [0, 1]")
      ->capture_default_str();
  simulate_cmd->add_option("--beta", simulate.beta, "Early-stop threshold factor, >= 1")
      ->capture_default_str();
  simulate_cmd->add_option("--recurrences", simulate.recurrences,
                           "Recurrences per job (default: 2 x batch sizes x power limits)");
  simulate_cmd->add_option("--format", simulate.format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  simulate_cmd->add_option("--trace-dir", simulate.trace_dir,
                           "Directory with summary_train.csv and summary_power_<gpu>.csv");
  simulate_cmd
      ->add_option("--selector", simulate.selector,
                   "Power-limit choice: cost, energy, time, slowdown:<factor>")
      ->capture_default_str();
  simulate_cmd->add_flag("--show-profiles", simulate.show_profiles,
                         "Also print the JIT power limit chosen for each batch size");

  RestoreLimitsCommandOptions restore;
  CLI::App* restore_cmd = app.add_subcommand(
      "restore-limits", "Put back the GPU power limits a crashed process recorded in its journal");
  restore_cmd->add_option("--journal", restore.journal, "The power-limits.journal file")
      ->required();

  const std::string command = argc > 1 ? argv[1] : "";
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << "zeus " << ZEUS_VERSION << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << fmt::format("zeus{}: error: {}; see `zeus{} --help`\n",
                       command.empty() || command[0] == '-' ? "" : " " + command, e.what(),
                       command.empty() || command[0] == '-' ? "" : " " + command);
    return kExitUsage;
  } catch (const ConfigError& e) {
    err << fmt::format("zeus {}: error: {}\n", command, e.what());
    return kExitUsage;
  }

  if (monitor_cmd->parsed()) {
    monitor.live = stdout_is_tty;
    return run_monitor(monitor, out, err);
  }
  if (simulate_cmd->parsed()) {
    return run_simulate(simulate, out, err);
  }
  return run_restore_limits(restore, out, err);
}

}  // namespace zeus::cli
