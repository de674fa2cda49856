#include "zeus/launch/launch_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "zeus/cluster/slurm.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/discovery.h"
#include "zeus/launch/elastic.h"
#include "zeus/launch/ports.h"
#include "zeus/process/child.h"

namespace zeus::launch {
namespace {

std::string required_env(const LaunchContext& context, std::string_view name) {
  auto value = context.env(name);
  if (!value || value->empty()) {
    throw ConfigError(fmt::format(
        "--slurm: {} is not set; run `zeus run --slurm` as one srun task per node inside a "
        "Slurm allocation (sbatch/salloc), or drop --slurm and pass --nnodes/--node-rank/"
        "--master-addr",
        name));
  }
  return *value;
}

std::string random_run_id() {
  std::random_device device;
  return fmt::format("{:08x}", device());
}

int resolve_nproc(const std::string& text, const LaunchContext& context) {
  if (text == "cpu") {
    return std::max(1, context.cpu_count);
  }
  if (text == "auto" || text == "gpu") {
    const int gpus = context.count_gpus ? context.count_gpus() : 0;
    if (text == "gpu" && gpus < 1) {
      throw ConfigError(
          "--nproc-per-node gpu: no GPU is visible (NVML found none); use a number, auto or cpu");
    }
    return std::max(1, gpus);
  }
  const int n = parse_int_or_throw(text, "--nproc-per-node");
  if (n < 1) {
    throw ConfigError(
        fmt::format("--nproc-per-node must be at least 1 (or auto, gpu, cpu), got {}", n));
  }
  return n;
}

}  // namespace

int StreamSelection::bits_for(int local_rank) const {
  const auto it = local_ranks.find(local_rank);
  return it == local_ranks.end() ? all : it->second;
}

StreamSelection parse_stream_selection(const std::string& text, const std::string& flag) {
  StreamSelection selection;
  auto bits = [&](std::string_view value) {
    const int b = parse_int_or_throw(value, flag);
    if (b < 0 || b > 3) {
      throw ConfigError(fmt::format(
          "{} takes 0 (none), 1 (stdout), 2 (stderr) or 3 (both), optionally per local rank "
          "as 0:1,1:3; got '{}'",
          flag, text));
    }
    return b;
  };
  if (text.find(':') == std::string::npos) {
    selection.all = bits(text);
    return selection;
  }
  for (const std::string& item : split(text, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      throw ConfigError(
          fmt::format("{}: '{}' is not LOCAL_RANK:STREAMS in '{}'", flag, item, text));
    }
    selection.local_ranks[parse_int_or_throw(std::string_view(item).substr(0, colon), flag)] =
        bits(std::string_view(item).substr(colon + 1));
  }
  return selection;
}

NodeCount parse_nnodes(const std::string& text) {
  const size_t colon = text.find(':');
  NodeCount n;
  if (colon == std::string::npos) {
    n.min = n.max = parse_int_or_throw(text, "--nnodes");
  } else {
    n.min = parse_int_or_throw(text.substr(0, colon), "--nnodes MIN");
    n.max = parse_int_or_throw(text.substr(colon + 1), "--nnodes MAX");
  }
  if (n.min < 1 || n.max < n.min) {
    throw ConfigError(
        fmt::format("--nnodes {}: give N >= 1, or MIN:MAX with 1 <= MIN <= MAX", text));
  }
  return n;
}

// torchrun's rendezvous and process flags: what zeus run does with each, or why it refuses.
void check_torchrun_flags(const LaunchOptions& o, bool elastic) {
  if (o.rdzv_backend != "static" && o.rdzv_backend != "c10d" && !is_etcd_backend(o.rdzv_backend)) {
    throw ConfigError(fmt::format(
        "--rdzv-backend {} is not supported: use static (each node gives --node-rank; rank 0 "
        "serves the store), c10d (elastic: zeus run at --rdzv-endpoint serves the rendezvous) or "
        "etcd (elastic: the rendezvous lives in the etcd cluster at --rdzv-endpoint)",
        o.rdzv_backend));
  }
  if (!is_etcd_backend(o.rdzv_backend) && o.rdzv_endpoint.find(',') != std::string::npos) {
    throw ConfigError(fmt::format(
        "--rdzv-endpoint {} lists several endpoints: only --rdzv-backend etcd takes a list (its "
        "members); {} takes one HOST[:PORT]",
        o.rdzv_endpoint, o.rdzv_backend));
  }
  const int min = o.min_nnodes.value_or(o.nnodes.value_or(1));
  if (o.rdzv_backend == "static" && min != o.nnodes.value_or(1)) {
    throw ConfigError(fmt::format(
        "--nnodes {}:{} asks for elastic membership: add --rdzv-backend c10d --rdzv-endpoint "
        "HOST:PORT (the same on every node), or give a fixed --nnodes with --node-rank",
        min, o.nnodes.value_or(1)));
  }
  if (elastic) {
    const bool etcd = is_etcd_backend(o.rdzv_backend);
    if (!o.master_addr) {
      throw ConfigError(
          etcd ? "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT[,HOST:PORT...]: etcd's "
                 "client endpoints, the same on every node"
               : "--rdzv-backend c10d over several nodes needs --rdzv-endpoint HOST[:PORT]: the "
                 "host whose zeus run serves the rendezvous, the same on every node");
    }
    if (o.node_rank) {
      throw ConfigError(fmt::format(
          "--node-rank with --rdzv-backend {}: the rendezvous numbers the nodes; drop it",
          o.rdzv_backend));
    }
    if (o.slurm || o.standalone) {
      throw ConfigError(
          fmt::format("--slurm and --standalone are static runs; drop them or --rdzv-backend {}",
                      o.rdzv_backend));
    }
  } else {
    if (!o.rdzv_conf.empty()) {
      throw ConfigError(fmt::format(
          "--rdzv-conf '{}' configures the elastic rendezvous (--rdzv-backend c10d over several "
          "nodes or --nnodes MIN:MAX); this run is static: drop it",
          o.rdzv_conf));
    }
    if (!o.local_addr.empty()) {
      throw ConfigError(fmt::format(
          "--local-addr {} names this node in the elastic rendezvous; this run is static (workers "
          "reach --master-addr directly): drop it",
          o.local_addr));
    }
  }
  if (o.run_path) {
    throw ConfigError(
        "--run-path (runpy.run_path of a script) is not supported; give the script itself: zeus "
        "run [options] train.py");
  }
  if (o.start_method != "spawn" && o.start_method != "fork" && o.start_method != "forkserver") {
    throw ConfigError(fmt::format(
        "--start-method {}: use spawn, fork or forkserver (zeus run starts every worker as its "
        "own program, as torchrun does for a script, whichever is given)",
        o.start_method));
  }
  if (o.role.empty()) {
    throw ConfigError("--role is empty; it names the workers' role (ROLE_NAME), default 'default'");
  }
}

LaunchContext default_launch_context() {
  LaunchContext context;
  context.cpu_count = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  context.count_gpus = [] {
    try {
      return device::open_gpu_set("auto", {.zeusd_from_env = false})->count();
    } catch (const Error&) {
      return 0;  // no driver, no GPU: auto means one CPU worker
    }
  };
  context.find_program = process::find_in_path;
  context.port_busy = port_in_use;
  context.free_port = pick_free_port;
  context.resolve_error = cluster::resolve_error;
  return context;
}

namespace {

// The master's port as the flags, Slurm or the environment gave it (std::nullopt: none given),
// and where its address came from (for messages).
struct ClusterSource {
  std::optional<int> port;
  std::string master_source;
};

// The cluster: flags, else Slurm (with --slurm), else one node on loopback. Fills the plan's
// nnodes, node_rank and master_addr, checked.
ClusterSource resolve_cluster(const LaunchOptions& options, const LaunchContext& context,
                              LaunchPlan& plan) {
  plan.nnodes = options.nnodes.value_or(1);
  plan.node_rank = options.node_rank.value_or(0);
  plan.master_addr = options.master_addr.value_or("127.0.0.1");
  std::string master_source = options.master_addr ? "--master-addr" : "the default";
  if (plan.elastic && plan.elastic->backend == "etcd") {
    // --rdzv-endpoint is etcd's; each round names the master. Until then, this node.
    plan.master_addr = plan.elastic->node_host;
    master_source = options.local_addr.empty() ? "this host's name" : "--local-addr";
  }
  std::optional<int> port = options.master_port;
  if (options.slurm) {
    const std::optional<cluster::SlurmStep> step = cluster::read_slurm(context.env);
    if (!step) {
      required_env(context, "SLURM_JOB_ID");  // throws, saying how to run under Slurm
    }
    if (step->in_step()) {
      const int here = step->tasks_on_node(step->nodeid.value_or(0));
      if (here != 1) {
        throw ConfigError(fmt::format(
            "--slurm: zeus run is one launcher per node, but this step runs {} tasks on this node "
            "({}); start it with `srun --ntasks-per-node 1 zeus run --slurm ...` (its "
            "--nproc-per-node workers are the node's ranks)",
            here, step->tasks_per_node_var));
      }
    } else if (step->nnodes > 1) {
      throw ConfigError(fmt::format(
          "--slurm: this is job {}'s batch script (no SLURM_STEP_ID), so zeus run would start only "
          "this node's workers of a {}-node job; run it as one task per node: `srun "
          "--ntasks-per-node 1 zeus run --slurm ...`",
          step->job_id, step->nnodes));
    }
    if (!options.nnodes) {
      plan.nnodes = step->nnodes;
    }
    if (!options.node_rank) {
      plan.node_rank = step->nodeid.value_or(0);
    }
    if (!options.master_addr) {
      if (auto env_addr = context.env("MASTER_ADDR")) {
        plan.master_addr = *env_addr;
        master_source = "MASTER_ADDR";
      } else if (!step->nodes.empty()) {
        plan.master_addr = step->nodes.front();
        master_source = "the first node of " + step->nodes_var;
      }
    }
    if (!port) {
      const auto env_port = context.env("MASTER_PORT");
      port = env_port ? parse_int_or_throw(*env_port, "MASTER_PORT")
                      : cluster::slurm_default_port(step->job_id, step->step_id.value_or(""));
    }
  }
  if (options.standalone) {
    if (options.nnodes.value_or(1) != 1 || options.slurm) {
      throw ConfigError("--standalone is a single-node run; drop --nnodes/--slurm or --standalone");
    }
    plan.master_addr = "127.0.0.1";
  }
  if (plan.nnodes < 1) {
    throw ConfigError(fmt::format("--nnodes must be at least 1, got {}", plan.nnodes));
  }
  if (plan.node_rank < 0 || plan.node_rank >= plan.nnodes) {
    throw ConfigError(fmt::format("--node-rank {} is outside 0..{} (--nnodes {})", plan.node_rank,
                                  plan.nnodes - 1, plan.nnodes));
  }
  if (plan.master_addr.empty()) {
    throw ConfigError("--master-addr is empty");
  }
  // Every node fails fast on a master nobody can reach by name, instead of retrying until the
  // store's timeout.
  if (context.resolve_error) {
    if (auto why = context.resolve_error(plan.master_addr)) {
      throw ConfigError(fmt::format(
          "the master address '{}' (from {}) does not resolve: {}; give an address every node "
          "reaches with --master-addr or MASTER_ADDR",
          plan.master_addr, master_source, *why));
    }
  }
  return {port, master_source};
}

// The rendezvous port: node 0's rank 0 serves it, so only node 0 can check it is free.
void resolve_master_port(const LaunchOptions& options, const LaunchContext& context,
                         std::optional<int> port, LaunchPlan& plan) {
  // Port 0 (torchrun's `--rdzv-endpoint localhost:0` on one node) means a free one, as
  // --standalone.
  if (plan.elastic) {
    plan.master_port = 0;  // each round's: a port node 0 found free
  } else if ((options.standalone && !port) || (port == 0 && plan.nnodes == 1)) {
    plan.master_port = context.free_port(plan.master_addr);
  } else {
    plan.master_port = port.value_or(cluster::kDefaultMasterPort);
    if (plan.master_port < 1 || plan.master_port > 65535) {
      throw ConfigError(fmt::format("--master-port must be in 1..65535, got {}", plan.master_port));
    }
    if (plan.node_rank == 0 && context.port_busy) {
      if (auto why = context.port_busy(plan.master_addr, plan.master_port)) {
        throw ConfigError(fmt::format(
            "cannot serve the rendezvous on {}:{}: {}; pick another port with --master-port, or "
            "use --standalone to get a free one",
            plan.master_addr, plan.master_port, *why));
      }
    }
  }
}

// The workers' command line: the program found, and where --local_rank goes.
struct Command {
  std::vector<std::string> argv;  // argv[0] resolved to the program's path
  size_t insert_at = 1;           // where --local_rank goes: after the program or script
};

// Python scripts and modules run under python3, as torchrun does.
Command resolve_command(const LaunchOptions& options, const LaunchContext& context) {
  std::vector<std::string> argv = options.command;
  size_t insert_at = 1;  // where --local_rank goes: after the program or script
  const std::string python =
      context.env(kEnvPython.name).value_or(std::string(kEnvPython.default_value));
  if (options.module) {
    argv.insert(argv.begin(), {python, "-m"});
    insert_at = 3;
  } else if (!options.no_python && argv[0].ends_with(".py")) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(argv[0], ec)) {
      throw ConfigError(fmt::format("script '{}' not found", argv[0]));
    }
    argv.insert(argv.begin(), python);
    insert_at = 2;
  }
  const std::string program = context.find_program ? context.find_program(argv[0]) : argv[0];
  if (program.empty()) {
    throw ConfigError(fmt::format("program '{}' not found: not an executable file{}", argv[0],
                                  argv[0].find('/') == std::string::npos ? " in PATH" : ""));
  }
  argv[0] = program;
  return {std::move(argv), insert_at};
}

// Where the run's logs and journals go.
void resolve_dirs(const LaunchOptions& options, const LaunchContext& context, bool any_files,
                  LaunchPlan& plan) {
  plan.log_dir = options.log_dir;
  if (plan.log_dir.empty() && any_files) {
    // As torchrun: --tee/--redirects without --log-dir write under a fresh temporary directory.
    plan.log_dir = std::filesystem::temp_directory_path() / ("zeus-run-" + plan.run_id);
  }
  // Not the temporary directory above: a later run looks for a stale journal in the same place.
  if (!options.log_dir.empty()) {
    plan.journal_dir = std::filesystem::absolute(options.log_dir);
  } else if (const auto dir = context.env("ZEUS_LOG_DIR"); dir && !dir->empty()) {
    plan.journal_dir = std::filesystem::absolute(*dir);
  } else {
    plan.run_journals_root = std::filesystem::absolute(std::string(kEnvLogDir.default_value));
    plan.journal_dir = contract::run_journal_dir(
        *plan.run_journals_root, fmt::format("{}-{}-{}", host_name(), ::getpid(), plan.run_id));
  }
}

}  // namespace

LaunchPlan resolve(const LaunchOptions& options, const LaunchContext& context) {
  LaunchPlan plan;
  if (options.command.empty()) {
    throw ConfigError("no program given: zeus run [options] PROGRAM [ARGS...]");
  }
  if (options.max_restarts < 0) {
    throw ConfigError(fmt::format("--max-restarts must be >= 0, got {}", options.max_restarts));
  }
  plan.max_restarts = options.max_restarts;
  plan.grace_period = options.grace_period;
  plan.run_id = options.run_id.empty() ? random_run_id() : options.run_id;
  plan.nproc_per_node = resolve_nproc(options.nproc_per_node, context);
  const int max_nodes = options.nnodes.value_or(1);
  const int min_nodes = options.min_nnodes.value_or(max_nodes);
  // etcd is elastic on any number of nodes (its endpoint is etcd's, not a master's); c10d on one
  // fixed node is a static run, as under torchrun.
  const bool elastic = is_etcd_backend(options.rdzv_backend) ||
                       (options.rdzv_backend == "c10d" && (max_nodes > 1 || min_nodes < max_nodes));
  check_torchrun_flags(options, elastic);
  if (elastic) {
    plan.elastic = resolve_elastic(options, min_nodes, max_nodes);
    plan.run_id = plan.elastic->rendezvous.run_id;  // every node's TORCHELASTIC_RUN_ID
  }

  const ClusterSource cluster = resolve_cluster(options, context, plan);
  plan.world_size = plan.nnodes * plan.nproc_per_node;
  resolve_master_port(options, context, cluster.port, plan);
  const Command command = resolve_command(options, context);
  const StreamSelection tee = parse_stream_selection(options.tee, "--tee");
  const StreamSelection redirects = parse_stream_selection(options.redirects, "--redirects");
  resolve_dirs(
      options, context,
      tee.all || redirects.all || !tee.local_ranks.empty() || !redirects.local_ranks.empty(), plan);
  if (!options.devices_per_worker_all && !options.devices.empty() &&
      static_cast<int>(options.devices.size()) < plan.nproc_per_node) {
    throw ConfigError(fmt::format(
        "--devices lists {} device(s) ({}) for {} workers per node; list one per worker, or add "
        "--devices-per-worker all to give every worker all of them",
        options.devices.size(), fmt::join(options.devices, ","), plan.nproc_per_node));
  }
  std::optional<std::string> omp;
  if (options.omp_num_threads) {
    if (*options.omp_num_threads < 1) {
      throw ConfigError(
          fmt::format("--omp-num-threads must be at least 1, got {}", *options.omp_num_threads));
    }
    omp = std::to_string(*options.omp_num_threads);
  } else if (!context.env("OMP_NUM_THREADS")) {
    omp = std::to_string(std::max(1, context.cpu_count / plan.nproc_per_node));
  }

  for (int local = 0; local < plan.nproc_per_node; ++local) {
    WorkerSpec w;
    w.local_rank = local;
    w.rank = plan.node_rank * plan.nproc_per_node + local;
    w.argv = command.argv;
    if (options.local_rank_arg) {
      w.argv.insert(w.argv.begin() + static_cast<std::ptrdiff_t>(command.insert_at),
                    fmt::format("--local_rank={}", local));
    }
    w.world.local_rank = local;
    w.world.local_world_size = plan.nproc_per_node;
    w.world.role_name = options.role;
    w.world.run_id = plan.run_id;
    w.world.max_restarts = plan.max_restarts;
    w.world.journal_dir = plan.journal_dir;
    if (!plan.log_dir.empty() && !context.env("ZEUS_LOG_DIR")) {
      w.world.log_dir = plan.log_dir;
    }
    set_world_env(w, plan);
    auto& env = w.env;
    if (omp) {
      env["OMP_NUM_THREADS"] = *omp;
    }
    // Output goes through a pipe: without this, Python would hold lines back in its buffer.
    if (!context.env("PYTHONUNBUFFERED")) {
      env["PYTHONUNBUFFERED"] = "1";
    }
    if (!options.devices.empty()) {
      env["CUDA_VISIBLE_DEVICES"] = options.devices_per_worker_all
                                        ? fmt::format("{}", fmt::join(options.devices, ","))
                                        : options.devices[static_cast<size_t>(local)];
    }
    w.tee_bits = tee.bits_for(local);
    w.redirect_bits = redirects.bits_for(local);
    w.console = options.local_ranks_filter.empty() ||
                std::find(options.local_ranks_filter.begin(), options.local_ranks_filter.end(),
                          local) != options.local_ranks_filter.end();
    plan.workers.push_back(std::move(w));
  }
  return plan;
}

void set_world_env(WorkerSpec& worker, const LaunchPlan& plan) {
  contract::WorkerEnv& w = worker.world;
  w.rank = worker.rank;
  w.world_size = plan.world_size;
  w.group_rank = plan.node_rank;
  w.group_world_size = plan.nnodes;
  w.master_addr = plan.master_addr;
  w.master_port = plan.master_port;
  for (auto& [name, value] : w.to_env()) {
    worker.env[name] = std::move(value);
  }
}

std::map<std::string, std::string> attempt_env(const WorkerSpec& worker, int restart_count) {
  std::map<std::string, std::string> env = worker.env;
  contract::WorkerEnv w = worker.world;
  w.restart_count = restart_count;
  for (auto& [name, value] : w.to_env()) {
    env[name] = std::move(value);
  }
  return env;
}

}  // namespace zeus::launch
