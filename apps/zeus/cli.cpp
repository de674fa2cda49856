#include "cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <ostream>

#include "zeus/common/build_info.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/units.h"

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
  app.set_version_flag("--version", std::string(version()));  // printed by version_text below
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
  monitor_cmd->add_option("--serve", monitor.serve,
                          "HOST:PORT: serve GET /metrics for Prometheus while monitoring");
  monitor_cmd->add_option("--kubelet-socket", monitor.kubelet_socket,
                          "With --serve: the kubelet's pod-resources socket "
                          "(/var/lib/kubelet/pod-resources/kubelet.sock); each GPU's series get "
                          "the pod, namespace and container holding it");
  monitor_cmd->add_option("--metrics-token-file", monitor.metrics_token_file,
                          "With --serve: a file holding the bearer token scrapes must send "
                          "(mode 600)");
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
  simulate_cmd
      ->add_option("--policy", simulate.policy,
                   "Batch-size policy: zeus (the paper's) or lean (less waste in pruning)")
      ->capture_default_str();
  simulate_cmd->add_option("--lean", simulate.lean,
                           "Lean's knobs over its defaults, e.g. gamma=1.25,patience=2,retry=1.25,"
                           "cap=1.25,spread=0.5 (0 turns a rule off)");
  simulate_cmd
      ->add_option("--fidelity", simulate.fidelity,
                   "Profiled epochs: zeus (the mean over limits, as the paper) or windows (the "
                   "profiler's windows limit by limit)")
      ->capture_default_str();
  simulate_cmd->add_flag("--explain", simulate.explain,
                         "Per job: where the cumulative energy went against the oracle");
  simulate_cmd->add_option("--dp", simulate.dp,
                           "Data-parallel GPUs, one entry each, e.g. v100,v100,v100*1.15,v100 "
                           "(*1.15: 15% slower): Zeus's single limit against per-GPU limits");
  simulate_cmd->add_option("--batch-size", simulate.batch_size,
                           "With --dp: each GPU's batch size (default: the workload's)");
  simulate_cmd->add_option("--carbon", simulate.carbon,
                           "Carbon-intensity trace (CSV datetime,carbonIntensity or "
                           "ElectricityMaps JSON): Zeus's fixed limit against the rule that "
                           "follows it, jobs back to back from its first hour");
  simulate_cmd->add_option("--price", simulate.price,
                           "Electricity-price trace (CSV datetime,price_per_kwh), as --carbon");
  simulate_cmd->add_option("--max-signal", simulate.max_signal,
                           "The rule's reference S_max: grid (the default: the signal's mean over "
                           "the day before each choice), chase (750 gCO2eq/kWh), the trace's "
                           "mean or max, or a number");
  simulate_cmd
      ->add_option("--interval", simulate.interval,
                   "With --carbon/--price: the rule chooses again at least this often")
      ->capture_default_str();
  simulate_cmd
      ->add_option("--relative-change", simulate.relative_change,
                   "With --carbon/--price: ... and when the signal moved by more than "
                   "this fraction")
      ->capture_default_str();
  simulate_cmd->add_flag("--no-forecast", simulate.no_forecast,
                         "With --carbon/--price: the rule goes by the signal now, not by the "
                         "trace's mean over the next interval");

  RestoreLimitsCommandOptions restore;
  CLI::App* restore_cmd = app.add_subcommand(
      "restore-limits", "Put back the GPU power limits a crashed process recorded in its journal");
  restore_cmd->add_option("--journal", restore.journal, "The power-limits.journal file")
      ->required();
  restore_cmd->add_flag("--force", restore.force,
                        "Restore even when the journal's writer still runs, or wrote it on "
                        "another host or before the last reboot");

  JobEnergyCommandOptions job_energy;
  CLI::App* job_energy_cmd = app.add_subcommand(
      "job-energy",
      "Per-job GPU energy kept by zeusd: start and stop (Slurm prolog, epilog), report");
  for (const char* action : {"start", "stop"}) {
    CLI::App* sub = job_energy_cmd->add_subcommand(
        action, std::string(action) + " measuring a job (with zeusd's admin token)");
    sub->add_option("--job", job_energy.jobs, "The job id (a Slurm job: $SLURM_JOB_ID)")
        ->required()
        ->expected(1);
    sub->add_option("--zeusd-socket", job_energy.zeusd_socket, "zeusd's socket");
    sub->add_option("--admin-token-file", job_energy.admin_token_file,
                    "zeusd's admin token (default: $ZEUSD_ADMIN_TOKEN_FILE, else "
                    "/var/lib/zeusd/admin.token)");
    sub->callback([&job_energy, action] { job_energy.action = action; });
    if (std::string(action) == "start") {
      sub->add_option("--gpus", job_energy.gpus, "NVML indices like 0,1 (default: every GPU)");
    }
  }
  CLI::App* report_sub =
      job_energy_cmd->add_subcommand("report", "Energy, time and average power of jobs");
  report_sub->add_option("jobs", job_energy.jobs, "Job ids (default: every job zeusd knows)");
  report_sub->add_option("--format", job_energy.format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  report_sub->add_option("--zeusd-socket", job_energy.zeusd_socket, "zeusd's socket");
  report_sub->callback([&job_energy] { job_energy.action = "report"; });
  job_energy_cmd->require_subcommand(1);

  BsoServerCommandOptions bso;
  CLI::App* bso_cmd = app.add_subcommand(
      "bso-server",
      "The batch-size optimizer as a service: Zeus 0.16's REST API (its client works unchanged) "
      "on SQLite or PostgreSQL");
  bso_cmd->add_option("--host", bso.host, "Address to listen on (IPv4)")->capture_default_str();
  bso_cmd->add_option("--port", bso.port, "TCP port (0: a free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  bso_cmd->add_option("--database", bso.database,
                      "sqlite:///FILE or postgresql://USER@HOST:PORT/DB (upstream's +driver forms "
                      "too); default $ZEUS_BSO_DATABASE_URL, else sqlite:///zeus_bso.db");
  add_duration(bso_cmd, "--trial-timeout", bso.trial_timeout,
               "Fail a trial handed out this long ago without a result, so a job whose client "
               "died does not wait for it (0: never, as upstream; default 24h)");
  bso_cmd->add_option("--max-body", bso.max_body_bytes, "Largest request body in bytes")
      ->capture_default_str();
  bso_cmd->add_option("--max-connections", bso.max_connections, "Connections at once")
      ->capture_default_str();
  add_duration(bso_cmd, "--idle-timeout", bso.idle_timeout,
               "Close a connection silent this long (default 60s)");
  bso_cmd
      ->add_option("--policy", bso.policy,
                   "Batch-size policy of jobs that name none (upstream's clients): zeus "
                   "(upstream's decisions) or lean (docs/optimizer.md)")
      ->capture_default_str();
  bso_cmd->add_option("--lean", bso.lean,
                      "lean's knobs over its defaults, e.g. gamma=1.5,cap=0 (with --policy lean)");

  launch::LaunchOptions run;
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Start and supervise the workers of a data-parallel job (a drop-in for torchrun): "
      "zeus run [options] [--] PROGRAM [ARGS...]. As torchrun, each of torchrun's flags takes "
      "its default from PET_<FLAG> (PET_NNODES, PET_NPROC_PER_NODE, ...: Kubeflow's pods)");
  add_run_flags(run_cmd, run);

  tune::TuneOptions tune;
  CLI::App* tune_cmd = app.add_subcommand(
      "tune", "Recurring jobs: pick the batch size of each run with Zeus's bandit");
  tune_cmd
      ->add_option_function<std::string>(
          "--batch-sizes",
          [&tune](const std::string& text) {
            tune.batch_sizes.clear();
            for (const auto& part : split(text, ',')) {
              const auto bs = parse_number<int64_t>(part);
              if (!bs || *bs < 1) {
                throw ConfigError(
                    fmt::format("--batch-sizes: '{}' is not a positive integer", part));
              }
              tune.batch_sizes.push_back(*bs);
            }
          },
          "Candidate batch sizes, e.g. 32,64,128,256")
      ->required();
  tune_cmd
      ->add_option("--default-batch-size", tune.default_batch_size,
                   "The batch size of the first run (one of --batch-sizes)")
      ->required();
  tune_cmd->add_option("--recurrences", tune.recurrences, "How many recurrences to run")
      ->capture_default_str();
  tune_cmd->add_option("--eta", tune.eta, "Energy vs time weight in [0, 1]")->capture_default_str();
  tune_cmd->add_option("--beta", tune.beta, "Early-stop threshold = beta x best cost so far")
      ->capture_default_str();
  tune_cmd->add_option("--seed", tune.seed, "Bandit seed; {seed} = seed + recurrence")
      ->capture_default_str();
  tune_cmd->add_option("--window", tune.window, "Thompson sampling window (0: all)")
      ->capture_default_str();
  tune_cmd
      ->add_option("--lr-scaling", tune.lr_scaling, "{lr} from --default-lr: none, linear, sqrt")
      ->capture_default_str();
  tune_cmd->add_option("--default-lr", tune.default_lr, "Learning rate at the default batch size");
  tune_cmd->add_option("--epochs", tune.epochs, "Value of {epochs}");
  tune_cmd
      ->add_option("--policy", tune.policy,
                   "Batch-size policy: zeus (the paper's) or lean (less waste in pruning)")
      ->capture_default_str();
  tune_cmd->add_option(
      "--lean", tune.lean,
      "Lean's knobs over its defaults, e.g. gamma=1.25,cap=0 (0 turns a rule off)");
  tune_cmd->add_option("--max-tries", tune.max_tries_per_recurrence,
                       "Tries per recurrence before giving up (0: batch sizes + 1)");
  tune_cmd->add_option("--log-dir", tune.log_dir, "Results, history (resumable)")
      ->capture_default_str();
  tune_cmd->add_option("--server", tune.server_url,
                       "Batch-size service (zeus bso-server) that decides for every tuner of the "
                       "job, e.g. http://127.0.0.1:8000");
  tune_cmd->add_option("--job-id", tune.job_id, "The job's name at the service (with --server)");
  tune_cmd->add_option("--target-metric", tune.target_metric,
                       "The metric a try must reach (with --server; passed as ZEUS_TARGET_METRIC)");
  tune_cmd->add_flag("--lower-is-better", tune.lower_is_better,
                     "The metric is a loss or an error (with --server)");
  tune_cmd->add_option("--gpus", tune.gpus,
                       "With --server: the job's GPUs (default: this machine's)");
  tune_cmd->add_option("--gpu-model", tune.gpu_model,
                       "With --server: their model (default: this machine's)");
  tune_cmd->add_option("--gpu-max-power-w", tune.gpu_max_power_w,
                       "With --server: their maximum power limit in W (default: this machine's)");
  add_duration(tune_cmd, "--grace-period", tune.grace_period,
               "After a stop signal is passed on to the command's process group, how long it has "
               "before SIGKILL (default 60s, longer than zeus run's own)");
  tune_cmd->add_option("command", tune.command,
                       "After --: the training command, with {bs} {lr} {seed} {epochs}");

  ReportCommandOptions report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "Write DIR/report.html (inline SVG plots) from a run's or a tune's log dir");
  report_cmd->add_option("dir", report.dir, "The log dir")->capture_default_str();
  report_cmd->add_option("--format", report.format, "html, or also print md or json")
      ->check(CLI::IsMember({"html", "md", "json"}))
      ->capture_default_str();
  report_cmd->add_option("--out", report.out, "Where the page goes; default DIR/report.html");

  const std::string command = argc > 1 ? argv[1] : "";
  // `zeus run [options] -- PROGRAM ARGS`: CLI11 hands a `--` without positionals back to the
  // parent app, so the command after it is taken off before parsing.
  std::vector<std::string> args(argv, argv + argc);
  std::optional<std::vector<std::string>> run_command;
  std::vector<EnvFlag> env_flags;  // zeus run's flags from torchrun's PET_* variables
  if (command == "run") {
    std::vector<std::string> after(args.begin() + 2, args.end());
    try {
      env_flags = pet_defaults(run_cmd, after);
    } catch (const ConfigError& e) {
      err << "zeus run: error: " << e.what() << "\n";
      return kExitUsage;
    }
    std::vector<std::string> from_env;
    for (const EnvFlag& f : env_flags) {
      from_env.insert(from_env.end(), f.args.begin(), f.args.end());
    }
    after.insert(after.begin(), from_env.begin(), from_env.end());
    args.resize(2);
    args.insert(args.end(), after.begin(), after.end());
    if (const auto at = run_separator(run_cmd, after)) {
      run_command.emplace(after.begin() + static_cast<std::ptrdiff_t>(*at) + 1, after.end());
      args.resize(2 + *at);
    }
  }
  std::vector<const char*> parse_argv;
  for (const auto& a : args) {
    parse_argv.push_back(a.c_str());
  }
  try {
    app.parse(static_cast<int>(parse_argv.size()), parse_argv.data());
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << version_text("zeus");
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << fmt::format("zeus{}: error: {}; see `zeus{} --help`\n",
                       command.empty() || command[0] == '-' ? "" : " " + command,
                       name_env_flags(e.what(), env_flags),
                       command.empty() || command[0] == '-' ? "" : " " + command);
    return kExitUsage;
  } catch (const ConfigError& e) {
    err << fmt::format("zeus {}: error: {}\n", command, name_env_flags(e.what(), env_flags));
    return kExitUsage;
  }

  // Every command maps its own errors to exit codes; what escapes them (a filesystem or
  // standard-library error no code path expected) is still one clear line, never terminate().
  try {
    if (monitor_cmd->parsed()) {
      monitor.live = stdout_is_tty;
      return run_monitor(monitor, out, err);
    }
    if (simulate_cmd->parsed()) {
      return run_simulate(simulate, out, err);
    }
    if (tune_cmd->parsed()) {
      return run_tune_command(tune, out, err);
    }
    if (report_cmd->parsed()) {
      return run_report(report, out, err);
    }
    if (bso_cmd->parsed()) {
      return run_bso_server(bso, out, err);
    }
    if (job_energy_cmd->parsed()) {
      return run_job_energy(job_energy, out, err);
    }
    if (run_cmd->parsed()) {
      run.command = run_command ? *run_command : run_cmd->remaining();
      return run_run(run, out, err, env_flags);
    }
    return run_restore_limits(restore, out, err);
  } catch (const std::filesystem::filesystem_error& e) {
    err << fmt::format("zeus {}: error: {} (path '{}'); check the path and its permissions\n",
                       command, e.code().message(), e.path1().string());
  } catch (const ConfigError& e) {
    err << fmt::format("zeus {}: error: {}\n", command, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    err << fmt::format("zeus {}: error: {}\n", command, e.what());
  }
  return kExitFailure;
}

}  // namespace zeus::cli
