// The `zeus` command line: each subcommand parses into an options struct and calls the library.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "zeus/launch/launch_options.h"
#include "zeus/sim/workload_model.h"
#include "zeus/tune/tuner.h"

namespace CLI {
class App;
}  // namespace CLI

namespace zeus::cli {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a device or I/O failure while running
inline constexpr int kExitUsage = 2;    // bad flags or input, missing devices: nothing was done

struct MonitorCommandOptions {
  std::string gpus = "all";  // "all", "none" or indices "0,1"
  std::string cpus;          // "" (none) or "all"
  std::chrono::nanoseconds interval = std::chrono::milliseconds(100);
  std::chrono::nanoseconds duration{0};  // 0: until SIGINT/SIGTERM
  std::string out;                       // FILE, DIR (existing, or ending in '/'), or "" (none)
  std::string format = "csv";            // csv or jsonl
  std::string device = "auto";           // auto, nvml, sim:<gpu>[:<workload>[:<bs>]]
  bool list = false;                     // print the backends and exit
  bool live = false;                     // redraw a status line (when stdout is a TTY)
  std::string serve;                     // HOST:PORT: serve GET /metrics there; "": no
  // With --serve: label each GPU's series with the pod holding it (the kubelet's socket).
  std::string kubelet_socket;
  // With --serve: scrapes must send this file's bearer token (mode 600); "": no token.
  std::string metrics_token_file;
};

struct SimulateCommandOptions {
  std::string gpu = "all";       // v100, a40, p100, rtx6000 or all
  std::string workload = "all";  // a dataset of the paper's jobs, or all
  std::string seeds = "1..10";   // "a..b", "a,b,c" or "a"
  double eta = 0.5;
  double beta = 2.0;
  int recurrences = -1;          // -1: the spec's default (2 x batch sizes x power limits)
  std::string format = "table";  // table, csv or json
  std::string trace_dir;         // empty: the repository's data/zeus-traces
  std::string selector = "cost";
  bool show_profiles = false;
  std::string policy = "zeus";    // zeus | lean
  std::string lean;               // lean's knobs over its defaults: "gamma=1.5,cap=0"
  std::string fidelity = "zeus";  // zeus | windows
  bool explain = false;           // where each job's energy went against the oracle
  // Data-parallel: one GPU per entry, "v100,v100*1.15,a40"; Zeus's single limit against the
  // per-GPU plan for --workload at --batch-size (each GPU's; 0: the workload's default).
  std::string dp;
  int64_t batch_size = 0;
  // Grid: the recurring jobs under a carbon-intensity (or price) trace, Zeus's fixed limit
  // against the rule that follows the signal (simulate_grid_command.cpp).
  std::string carbon;
  std::string price;
  // S_max: a number, "mean" or "max" of the trace; empty: 750 gCO2eq/kWh, or the price trace's
  // maximum.
  std::string max_signal;
  std::string interval = "30m";   // the rule chooses again at least this often
  double relative_change = 0.10;  // ... and when the signal moved by more than this
  bool no_forecast = false;       // the rule goes by the value now, not the next interval's mean
};

struct ReportCommandOptions {
  std::filesystem::path dir = "zeus_log";
  std::string format = "html";  // html (write the page only), md or json (also print)
  std::filesystem::path out;    // the page; default DIR/report.html
};

struct RestoreLimitsCommandOptions {
  std::filesystem::path journal;
  bool force = false;  // also a journal whose owner runs, or from another host or boot
};

struct BsoServerCommandOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string database;  // "": ZEUS_BSO_DATABASE_URL, else sqlite:///zeus_bso.db
  // A trial handed out this long ago without a result is failed (0: never, as upstream).
  std::chrono::nanoseconds trial_timeout = std::chrono::hours(24);
  size_t max_body_bytes = 64 * 1024;
  unsigned max_connections = 512;
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(60);
  // The policy of jobs whose registration names none (upstream's clients): zeus | lean.
  std::string policy = "zeus";
  std::string lean;  // lean's knobs over its defaults
};

// zeus run's flags on `cmd`, parsed into `run` (run_flags.cpp).
void add_run_flags(CLI::App* cmd, launch::LaunchOptions& run);
// Where the `--` that ends zeus run's options stands in `args` (the words after "run"), if it
// comes before the program; a `--` after the program is the program's.
std::optional<size_t> run_separator(const CLI::App* cmd, const std::vector<std::string>& args);
// A torchrun flag whose value came from its PET_<FLAG> variable.
struct EnvFlag {
  std::string flag;      // "--nproc-per-node"
  std::string variable;  // "PET_NPROC_PER_NODE"
  std::string value;
  std::vector<std::string> args;  // what it adds to the command line
};
// torchrun's PET_* defaults for the flags not in `args` (the words after "run"): each flag's
// default is its variable, as torchrun's argparse reads it (Kubeflow's PyTorchJob and TrainJob
// describe the job so); a flag on the command line wins. Throws ConfigError naming a switch's
// variable (PET_STANDALONE) whose value is not 1 or 0.
std::vector<EnvFlag> pet_defaults(const CLI::App* cmd, const std::vector<std::string>& args);
// `message` with the variable named where it speaks of a flag that came from one.
std::string name_env_flags(std::string message, const std::vector<EnvFlag>& used);

// Starts the workers (their output goes to this process's stdout and stderr, prefixed) and
// returns the exit code of the run.
int run_run(const launch::LaunchOptions& options, std::ostream& out, std::ostream& err,
            const std::vector<EnvFlag>& env_flags = {});

// `zeus job-energy start|stop|report`: per-job energy kept by zeusd (Slurm prolog and epilog).
struct JobEnergyCommandOptions {
  std::string action;             // start, stop or report
  std::vector<std::string> jobs;  // start/stop: exactly one; report: any (none: all)
  std::string gpus;               // start: "0,1"; empty: every GPU
  std::string format = "table";   // report: table, csv or json
  std::string zeusd_socket;       // empty: ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT, /run/zeusd/zeusd.sock
  // start/stop: zeusd's admin token file; empty: ZEUSD_ADMIN_TOKEN_FILE, else
  // /var/lib/zeusd/admin.token where it exists.
  std::string admin_token_file;
};

// Run a parsed subcommand; messages go to `out` (results) and `err` (errors, one line each).
int run_monitor(const MonitorCommandOptions& options, std::ostream& out, std::ostream& err);
int run_simulate(const SimulateCommandOptions& options, std::ostream& out, std::ostream& err);
// zeus simulate --dp (simulate_dp_command.cpp).
int run_simulate_dp(const SimulateCommandOptions& options, std::ostream& out, std::ostream& err);
// The traced jobs `--gpu` and `--workload` name (each GPU's traces read once), one model each.
// Throws ConfigError for an unknown GPU or workload, IoError for a missing trace.
void for_each_traced_job(const SimulateCommandOptions& options,
                         const std::function<void(const sim::WorkloadModel&)>& each);
// zeus simulate --carbon/--price (simulate_grid_command.cpp).
int run_simulate_grid(const SimulateCommandOptions& options, std::ostream& out, std::ostream& err);
int run_report(const ReportCommandOptions& options, std::ostream& out, std::ostream& err);
// Serves until SIGINT or SIGTERM; kExitUsage when the database or address cannot be used.
int run_bso_server(const BsoServerCommandOptions& options, std::ostream& out, std::ostream& err);
int run_restore_limits(const RestoreLimitsCommandOptions& options, std::ostream& out,
                       std::ostream& err);

int run_job_energy(const JobEnergyCommandOptions& options, std::ostream& out, std::ostream& err);

int run_tune_command(const tune::TuneOptions& options, std::ostream& out, std::ostream& err);

// Parses argv and runs the subcommand. `stdout_is_tty` enables the live line of `monitor`.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            bool stdout_is_tty = false);

}  // namespace zeus::cli
