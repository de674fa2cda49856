// `zeus run`'s flags: torchrun's, with its underscore spellings, and zeus-cpp's own. What each
// torchrun flag does here is in docs/launcher.md's table; LaunchOptions' comments say which are
// refused by resolve().
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

#include "cli.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/units.h"

namespace zeus::cli {

void add_run_flags(CLI::App* cmd, launch::LaunchOptions& run) {
  // Everything from PROGRAM on belongs to the program.
  cmd->prefix_command();
  cmd->add_option("--nproc-per-node,--nproc_per_node", run.nproc_per_node,
                  "Workers on this node: N, auto (one per visible GPU, else 1), gpu or cpu")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--nnodes",
      [&run](const std::string& text) {
        const launch::NodeCount n = launch::parse_nnodes(text);
        run.min_nnodes = n.min;
        run.nnodes = n.max;
      },
      "Nodes: N, or MIN:MAX (elastic, with --rdzv-backend c10d); default 1");
  cmd->add_option("--node-rank,--node_rank", run.node_rank, "This node's rank; default 0");
  cmd->add_option("--master-addr,--master_addr", run.master_addr,
                  "Address of node 0; default 127.0.0.1");
  cmd->add_option("--master-port,--master_port", run.master_port,
                  "Rendezvous port on node 0; default 29500");
  cmd->add_option_function<std::string>(
      "--rdzv-endpoint,--rdzv_endpoint",
      [&run](const std::string& endpoint) {
        run.rdzv_endpoint = endpoint;
        if (endpoint.find(',') != std::string::npos) {
          run.master_addr = endpoint;  // etcd's list of members (refused for the others)
          return;
        }
        const size_t colon = endpoint.rfind(':');
        if (colon == std::string::npos || colon + 1 == endpoint.size()) {
          run.master_addr = endpoint;
          return;
        }
        run.master_addr = endpoint.substr(0, colon);
        const auto port = parse_number<int>(endpoint.substr(colon + 1));
        if (!port) {
          throw ConfigError(fmt::format("--rdzv-endpoint '{}' is not HOST[:PORT]", endpoint));
        }
        run.master_port = *port;
      },
      "HOST[:PORT]: static, the same as --master-addr/--master-port (port 0 on one node: a free "
      "one); c10d over several nodes: the host whose zeus run serves the rendezvous (port "
      "29400); etcd: HOST:PORT[,HOST:PORT...], etcd's client endpoints (port 2379)");
  cmd->add_option("--rdzv-backend,--rdzv_backend", run.rdzv_backend,
                  "static (default); c10d: elastic over several nodes or --nnodes MIN:MAX, served "
                  "by the endpoint's zeus run; etcd: elastic, kept in etcd (no node is special)")
      ->capture_default_str();
  cmd->add_option("--rdzv-conf,--rdzv_conf", run.rdzv_conf,
                  "Elastic: join_timeout=S,last_call_timeout=S,read_timeout=S (torchrun's keys), "
                  "token_file=PATH (the nodes' shared secret); etcd: protocol, cacert, cert, key, "
                  "user, password_file");
  cmd->add_option("--rdzv-id,--rdzv_id,--run-id,--run_id", run.run_id,
                  "Run id (TORCHELASTIC_RUN_ID); default random");
  cmd->add_flag("--standalone", run.standalone,
                "Single node on 127.0.0.1 with a free port chosen for you");
  cmd->add_option("--max-restarts,--max_restarts", run.max_restarts,
                  "Restart all workers up to K times after a failure")
      ->capture_default_str();
  cmd->add_option("--role", run.role, "The workers' role name (ROLE_NAME)")->capture_default_str();
  cmd->add_option("--local-addr,--local_addr", run.local_addr,
                  "Elastic: how the other nodes reach this one (default: the host name)");
  cmd->add_option("--start-method,--start_method", run.start_method,
                  "spawn, fork or forkserver: accepted; every worker runs as its own program")
      ->capture_default_str();
  cmd->add_flag("--run-path,--run_path", run.run_path, "runpy.run_path: refused");
  cmd->add_flag("--local-rank-arg,--local_rank_arg,--use-local-rank-arg", run.local_rank_arg,
                "Also pass --local_rank=N to each worker (torch.distributed.launch style)");
  cmd->add_option_function<std::string>(
      "--devices",
      [&run](const std::string& list) {
        run.devices = split(list, ',');
        if (std::find(run.devices.begin(), run.devices.end(), "") != run.devices.end()) {
          throw ConfigError(fmt::format("--devices '{}' has an empty entry", list));
        }
      },
      "GPUs for this node's workers, one per local rank (CUDA_VISIBLE_DEVICES), e.g. 0,1,4,6");
  cmd->add_option_function<std::string>(
      "--devices-per-worker,--devices_per_worker",
      [&run](const std::string& mode) {
        if (mode != "all" && mode != "1") {
          throw ConfigError(fmt::format("--devices-per-worker takes 1 or all, got '{}'", mode));
        }
        run.devices_per_worker_all = mode == "all";
      },
      "1 (default): one device each; all: every worker sees the whole --devices list");
  cmd->add_option("--log-dir,--log_dir", run.log_dir,
                  "Write each rank's stdout.log/stderr.log under DIR/attempt_K/RANK/");
  cmd->add_option("-t,--tee", run.tee,
                  "Streams also written to log files: 0 none, 1 stdout, 2 stderr, 3 both "
                  "(or per local rank, 0:1,1:3)");
  cmd->add_option("-r,--redirects", run.redirects,
                  "Streams written to log files only, not the console (same syntax)");
  cmd->add_option_function<std::string>(
      "--local-ranks-filter,--local_ranks_filter",
      [&run](const std::string& list) {
        run.local_ranks_filter.clear();
        for (const auto& item : split(list, ',')) {
          const auto rank = parse_number<int>(item);
          if (!rank || *rank < 0) {
            throw ConfigError(fmt::format(
                "--local-ranks-filter '{}': '{}' is not a local rank (e.g. 0,1)", list, item));
          }
          run.local_ranks_filter.push_back(*rank);
        }
      },
      "Show only these local ranks' output on the console, e.g. 0 (log files keep all)");
  cmd->add_option_function<std::string>(
         "--grace-period,--grace_period",
         [&run](const std::string& text) {
           run.grace_period = parse_duration(text, "--grace-period");
         },
         "Wait between SIGTERM and SIGKILL when stopping workers (default 30s)")
      ->type_name("DURATION");
  cmd->add_option_function<double>(
      "--monitor-interval,--monitor_interval",
      [](double seconds) {
        if (!(seconds > 0)) {
          throw ConfigError(fmt::format("--monitor-interval must be > 0 s, got {}", seconds));
        }
      },
      "torchrun's longest wait to notice an exit, in s: accepted; exits are seen at once here");
  cmd->add_option("--omp-num-threads,--omp_num_threads", run.omp_num_threads,
                  "OMP_NUM_THREADS for the workers (default: cores / nproc when unset)");
  cmd->add_flag("--slurm", run.slurm,
                "Take nnodes, node rank and master from SLURM_* (one srun task per node)");
  cmd->add_flag("--no-python,--no_python", run.no_python,
                "Run PROGRAM as is, even when it ends in .py");
  cmd->add_flag("-m,--module", run.module, "PROGRAM is a Python module: python3 -m PROGRAM");
}

namespace {

// torchrun's flags that take their default from PET_<DEST> (its argparse `env` and `check_env`
// actions), which Kubeflow's PyTorchJob and Trainer's TrainJob set to describe the job.
struct PetFlag {
  std::string_view flag;      // zeus run's long name
  std::string_view variable;  // torchrun's
  bool is_switch = false;     // check_env: an integer, non-zero meaning on
};
constexpr PetFlag kPetFlags[] = {
    {"--nnodes", "PET_NNODES"},
    {"--nproc-per-node", "PET_NPROC_PER_NODE"},
    {"--node-rank", "PET_NODE_RANK"},
    {"--master-addr", "PET_MASTER_ADDR"},
    {"--master-port", "PET_MASTER_PORT"},
    {"--rdzv-backend", "PET_RDZV_BACKEND"},
    {"--rdzv-endpoint", "PET_RDZV_ENDPOINT"},
    {"--rdzv-id", "PET_RDZV_ID"},
    {"--rdzv-conf", "PET_RDZV_CONF"},
    {"--standalone", "PET_STANDALONE", true},
    {"--max-restarts", "PET_MAX_RESTARTS"},
    {"--monitor-interval", "PET_MONITOR_INTERVAL"},
    {"--start-method", "PET_START_METHOD"},
    {"--role", "PET_ROLE"},
    {"--module", "PET_MODULE", true},
    {"--no-python", "PET_NO_PYTHON", true},
    {"--run-path", "PET_RUN_PATH", true},
    {"--log-dir", "PET_LOG_DIR"},
    {"--redirects", "PET_REDIRECTS"},
    {"--tee", "PET_TEE"},
    {"--local-ranks-filter", "PET_LOCAL_RANKS_FILTER"},
    {"--local-addr", "PET_LOCAL_ADDR"},
};

// The number of leading arguments that are zeus run's flags and their values (the program, or
// `--`, comes after them).
size_t flag_count(const CLI::App* cmd, const std::vector<std::string>& args) {
  size_t i = 0;
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--" || a.size() < 2 || a[0] != '-') {
      return i;
    }
    const CLI::Option* opt =
        cmd->get_option_no_throw(a.find('=') == std::string::npos ? a : a.substr(0, a.find('=')));
    i +=
        (a.find('=') == std::string::npos && opt != nullptr && opt->get_expected_min() > 0) ? 2 : 1;
  }
  return args.size();
}

}  // namespace

std::vector<EnvFlag> pet_defaults(const CLI::App* cmd, const std::vector<std::string>& args) {
  const size_t n = flag_count(cmd, args);
  std::vector<const CLI::Option*> given;
  for (size_t i = 0; i < n; ++i) {
    const std::string& a = args[i];
    if (a.starts_with("-")) {
      if (const CLI::Option* o = cmd->get_option_no_throw(a.substr(0, a.find('=')))) {
        given.push_back(o);
      }
    }
  }
  std::vector<EnvFlag> out;
  for (const PetFlag& f : kPetFlags) {
    const CLI::Option* opt = cmd->get_option_no_throw(std::string(f.flag));
    if (opt == nullptr || std::find(given.begin(), given.end(), opt) != given.end()) {
      continue;  // a flag on the command line wins over its variable
    }
    const auto value = get_launcher_env(f.variable);
    if (!value) {
      continue;
    }
    EnvFlag e{std::string(f.flag), std::string(f.variable), *value, {}};
    if (f.is_switch) {
      const std::string v = to_lower(*value);
      if (v == "0" || v == "false") {
        continue;
      }
      if (v != "1" && v != "true") {
        throw ConfigError(
            fmt::format("{}='{}': expected 1 or 0 (torchrun's {})", f.variable, *value, f.flag));
      }
      e.args = {std::string(f.flag)};
    } else {
      e.args = {std::string(f.flag), *value};
    }
    out.push_back(std::move(e));
  }
  // Kubeflow's PyTorchJob (v1) gives a multi-node job's pods MASTER_ADDR and MASTER_PORT, and
  // some versions no PET_MASTER_*: where the job came in PET_* variables and names no master,
  // PyTorchJob's are the defaults (torchrun would take 127.0.0.1 and hang).
  const bool from_pet = !out.empty();
  for (const auto& names :
       {std::pair{"--master-addr", "MASTER_ADDR"}, std::pair{"--master-port", "MASTER_PORT"}}) {
    // Not a structured binding: the lambda below captures it, which clang before 16 refuses.
    const char* const flag = names.first;
    const char* const variable = names.second;
    const CLI::Option* opt = cmd->get_option_no_throw(flag);
    const bool set =
        std::find(given.begin(), given.end(), opt) != given.end() ||
        std::any_of(out.begin(), out.end(), [&](const EnvFlag& e) { return e.flag == flag; });
    const auto value = get_launcher_env(variable);
    if (from_pet && !set && value && !get_launcher_env("PET_RDZV_ENDPOINT")) {
      out.push_back({flag, variable, *value, {flag, *value}});
    }
  }
  return out;
}

std::string name_env_flags(std::string message, const std::vector<EnvFlag>& used) {
  for (const EnvFlag& e : used) {
    std::string underscored = e.flag;
    std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
    if (message.find(e.flag) != std::string::npos ||
        message.find(underscored) != std::string::npos) {
      message += fmt::format(" (from {}='{}', torchrun's variable for {}: fix it, or give {})",
                             e.variable, e.value, e.flag, e.flag);
    }
  }
  return message;
}

std::optional<size_t> run_separator(const CLI::App* cmd, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      return i;
    }
    if (a.size() < 2 || a[0] != '-') {
      return std::nullopt;  // the program: a `--` after it is one of its arguments
    }
    if (a.find('=') != std::string::npos) {
      continue;
    }
    const CLI::Option* opt = cmd->get_option_no_throw(a);
    if (opt != nullptr && opt->get_expected_min() > 0) {
      ++i;  // its value
    }
  }
  return std::nullopt;
}

}  // namespace zeus::cli
