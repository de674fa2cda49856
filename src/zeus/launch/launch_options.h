// What `zeus run` is asked to do (LaunchOptions, straight from the command line) and what it
// will do (LaunchPlan: validated, with the cluster, port and per-worker environments resolved).
// Resolution is pure apart from the injectable environment lookup and the port probe, so the
// torchrun-compatible environment contract is unit-tested without starting anything.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zeus/cluster/env.h"
#include "zeus/contract/worker_env.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch {

// Which of a worker's streams (bit 1: stdout, bit 2: stderr) a flag applies to, per local rank
// (torchrun's `--tee 3` or `--tee 0:1,1:2`).
struct StreamSelection {
  int all = 0;                     // applies to every local rank without an entry
  std::map<int, int> local_ranks;  // local rank -> bits
  int bits_for(int local_rank) const;
};
// Parses "0".."3" or "lr:bits,lr:bits"; throws ConfigError naming `flag`.
StreamSelection parse_stream_selection(const std::string& text, const std::string& flag);
// torchrun's --nnodes: "N" (MIN = MAX = N), or "MIN:MAX" (elastic with --rdzv-backend c10d).
// Throws ConfigError for non-numbers, MIN < 1 or MIN > MAX.
struct NodeCount {
  int min = 1;
  int max = 1;
};
NodeCount parse_nnodes(const std::string& text);

struct LaunchOptions {
  std::string nproc_per_node = "1";  // N, auto, gpu or cpu
  // Unset: 1 node, node rank 0, 127.0.0.1 (or, with --slurm, from SLURM_*).
  std::optional<int> nnodes;      // MAX of --nnodes
  std::optional<int> min_nnodes;  // MIN of --nnodes (elastic when < MAX)
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;  // default 29500 (--slurm: from the job id; --standalone: free)
  bool standalone = false;
  int max_restarts = 0;
  bool local_rank_arg = false;  // also pass --local_rank=N (torch.distributed.launch style)
  std::vector<std::string> devices;
  bool devices_per_worker_all = false;
  std::filesystem::path log_dir;
  std::string tee = "0";
  std::string redirects = "0";
  std::chrono::nanoseconds grace_period = std::chrono::seconds(30);
  std::optional<int> omp_num_threads;
  bool slurm = false;
  bool no_python = false;            // run PROGRAM as given even when it ends in .py
  bool module = false;               // PROGRAM is a Python module: python3 -m PROGRAM
  std::string run_id;                // default: a fresh random id
  std::vector<std::string> command;  // PROGRAM ARGS...
  // torchrun's flags that zeus run accepts with torchrun's meaning, or refuses in resolve()
  // with what is supported (docs/launcher.md's table): nothing is accepted and ignored.
  // static; c10d: on one node the same as static, on more (or MIN < MAX) the elastic
  // rendezvous at --rdzv-endpoint; etcd (or etcd-v2): the elastic rendezvous in the etcd at
  // --rdzv-endpoint (launch/rendezvous.h).
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;     // as given: etcd takes a list of HOST:PORT
  std::string rdzv_conf;         // join_timeout, last_call_timeout, read_timeout, ... (elastic)
  std::string role = "default";  // ROLE_NAME
  std::string local_addr;        // elastic: how the other nodes reach this one (default: host name)
  std::string start_method = "spawn";   // spawn, fork or forkserver: every worker is exec'd
  std::vector<int> local_ranks_filter;  // console output of these local ranks only; empty: all
  bool run_path = false;                // refused (runpy.run_path of a script)
};

struct WorkerSpec {
  int rank = 0;
  int local_rank = 0;
  std::vector<std::string> argv;
  contract::WorkerEnv world;               // what the worker is told of its world (in `env` too)
  std::map<std::string, std::string> env;  // added to (or replacing) the launcher's environment
  int tee_bits = 0;                        // streams also written to the log files
  int redirect_bits = 0;  // streams written to the log files only (not the console)
  bool console = true;    // false: --local-ranks-filter leaves this rank off the console
};

// An elastic run (--rdzv-backend c10d over several nodes or MIN < MAX, or etcd): which backend,
// where the rendezvous is (c10d: whether this node may serve it; etcd: in
// rendezvous.etcd.endpoints), and how the others reach this node.
struct ElasticPlan {
  std::string backend = "c10d";  // c10d or etcd
  std::string endpoint_host;
  int endpoint_port = 29400;
  bool serve = false;  // the endpoint is this host: serve it (unless another launcher here does)
  std::string node_host;
  RendezvousOptions rendezvous;
};

struct LaunchPlan {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  int max_restarts = 0;
  std::chrono::nanoseconds grace_period{};
  std::filesystem::path log_dir;  // empty: no per-rank log files
  // Where the workers write their power-limit journals (ZEUS_JOURNAL_DIR) and so where this
  // launcher settles them, absolute: --log-dir, else the launcher's ZEUS_LOG_DIR, else a
  // directory of this run's own under zeus_log/.journals/ (contract::run_journal_dir).
  std::filesystem::path journal_dir;
  // Set when journal_dir is a run's own: where the other runs' are (zeus_log/, absolute), whose
  // journals this launcher also settles when their owners are gone.
  std::optional<std::filesystem::path> run_journals_root;
  std::string run_id;
  std::vector<WorkerSpec> workers;  // attempt 0; restart_env() gives later attempts'
  // Set: ranks, world and master come from each rendezvous round (launch/elastic.h).
  std::optional<ElasticPlan> elastic;
};

// Everything resolution needs from the machine, injectable for tests.
struct LaunchContext {
  cluster::EnvLookup env = cluster::process_env;
  int cpu_count = 1;
  // Visible GPUs for --nproc-per-node auto/gpu; called only for those.
  std::function<int()> count_gpus;
  // Resolves PROGRAM like execvp; empty when not found. Tests inject.
  std::function<std::string(const std::string&)> find_program;
  // Whether this node may bind master_port (checked on node 0 only); returns a message naming
  // the holder when busy. Tests inject.
  std::function<std::optional<std::string>(const std::string& addr, int port)> port_busy;
  std::function<int(const std::string& addr)> free_port;
  // std::nullopt when the host name resolves, else why not; empty: not checked. Tests inject.
  std::function<std::optional<std::string>(const std::string& host)> resolve_error;
};
LaunchContext default_launch_context();

// Validates and resolves. Throws ConfigError (exit code 2 in the CLI) for: no program, program
// not found, nproc < 1, nnodes < 1, node rank outside 0..nnodes-1, bad port, a given port that
// is busy, --slurm outside a Slurm allocation, bad --tee/--redirects/--devices.
LaunchPlan resolve(const LaunchOptions& options, const LaunchContext& context);

// The worker's world from its rank and the plan's (rank, world, node, nodes, master), written
// into its environment with the rest of its contract::WorkerEnv.
void set_world_env(WorkerSpec& worker, const LaunchPlan& plan);

// The environment of `worker` for restart attempt `restart_count`.
std::map<std::string, std::string> attempt_env(const WorkerSpec& worker, int restart_count);

}  // namespace zeus::launch
