// Every ZEUS_* environment variable is declared once here, with its default and a doc line, and
// read through get_env(), which logs (once per variable) when a variable is set.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zeus {

struct EnvVar {
  std::string_view name;
  std::string_view default_value;  // empty: unset means "not given"
  std::string_view doc;
};

inline constexpr EnvVar kEnvNvmlLibrary{
    "ZEUS_NVML_LIBRARY", "",
    "Path of the NVML library to load instead of libnvidia-ml.so.1 (tests point it at the fake)"};
inline constexpr EnvVar kEnvAmdsmiLibrary{
    "ZEUS_AMDSMI_LIBRARY", "",
    "Path of the AMD SMI library to load instead of searching for libamd_smi.so.26/.25/.24 "
    "(tests point it at the fake)"};
// Upstream Zeus's names: a job sets GPU limits through the node daemon (zeusd) when given.
inline constexpr EnvVar kEnvZeusdSockPath{
    "ZEUSD_SOCK_PATH", "",
    "Unix socket of the node daemon (zeusd): GPU limits are set through it, not NVML"};
inline constexpr EnvVar kEnvZeusdHostPort{
    "ZEUSD_HOST_PORT", "",
    "host:port of a zeusd served over TCP (used when ZEUSD_SOCK_PATH is not set)"};
inline constexpr EnvVar kEnvZeusdToken{"ZEUSD_TOKEN", "",
                                       "Bearer token for zeusd (needed over TCP)"};
// Read only by `zeus job-energy start|stop` (the Slurm prolog and epilog), never by a job.
inline constexpr EnvVar kEnvZeusdAdminTokenFile{
    "ZEUSD_ADMIN_TOKEN_FILE", "/var/lib/zeusd/admin.token",
    "zeusd's admin token file, for `zeus job-energy start|stop` (root on the host reads it)"};
// Upstream Zeus's name: the batch-size service's database (zeus bso-server).
inline constexpr EnvVar kEnvBsoDatabaseUrl{
    "ZEUS_BSO_DATABASE_URL", "sqlite:///zeus_bso.db",
    "Database of zeus bso-server when --database is not given (sqlite:/// or postgresql://)"};
// zeus-cpp's: a train loader's batch size from the service (job/batch_size_trial.h).
inline constexpr EnvVar kEnvBsoServerUrl{
    "ZEUS_BSO_SERVER_URL", "",
    "Batch-size service (zeus bso-server) the train loader asks for its batch size, e.g. "
    "http://127.0.0.1:8000"};
inline constexpr EnvVar kEnvBsoBatchSizes{
    "ZEUS_BSO_BATCH_SIZES", "",
    "Global batch sizes the service chooses from (\"32,64,128\") when the program names none"};
// zeus-cpp's: a training job's state pushed to a Prometheus Pushgateway (job/job_metrics.h).
inline constexpr EnvVar kEnvPushgatewayUrl{
    "ZEUS_PUSHGATEWAY_URL", "",
    "Prometheus Pushgateway the job's master pushes its state to at each epoch end, e.g. "
    "http://127.0.0.1:9091"};
// zeus-cpp's: the elastic rendezvous's shared secret (launch/rendezvous_auth.h).
inline constexpr EnvVar kEnvRdzvTokenFile{
    "ZEUS_RDZV_TOKEN_FILE", "",
    "File (mode 600) whose first line is the elastic rendezvous's shared secret, when "
    "--rdzv-conf token_file is not given; the same on every node"};
inline constexpr EnvVar kEnvTraceDir{
    "ZEUS_TRACE_DIR", "", "Directory holding summary_power_<gpu>.csv for the simulated GPUs"};
inline constexpr EnvVar kEnvSimGpus{"ZEUS_SIM_GPUS", "1",
                                    "Number of simulated GPUs a sim: device spec creates"};
inline constexpr EnvVar kEnvSimState{
    "ZEUS_SIM_STATE", "",
    "State file shared by the simulated GPUs of one node (created by the first process)"};
inline constexpr EnvVar kEnvRaplRoot{"ZEUS_RAPL_ROOT", "/sys/class/powercap",
                                     "Root of the powercap sysfs tree read for CPU energy"};
inline constexpr EnvVar kEnvSpawnWorker{
    "ZEUS_SPAWN_WORKER", "", "Set by zeus::distributed::spawn in the workers it re-executes"};
inline constexpr EnvVar kEnvSpawnErrorDir{
    "ZEUS_SPAWN_ERROR_DIR", "",
    "Where zeus::distributed::spawn's workers leave the error that ended them"};
inline constexpr EnvVar kEnvPython{
    "ZEUS_PYTHON", "python3",
    "Interpreter `zeus run` starts Python scripts (PROGRAM ending in .py, or -m) with"};
inline constexpr EnvVar kEnvLogDir{
    "ZEUS_LOG_DIR", "zeus_log",
    "Where zeus::DataLoader writes profiles, results, power logs and the power-limit journal"};
inline constexpr EnvVar kEnvJobId{"ZEUS_JOB_ID", "zeus",
                                  "Prefix of the train result file {job_id}+bs{B}.train.json"};
inline constexpr EnvVar kEnvTargetMetric{
    "ZEUS_TARGET_METRIC", "", "Validation metric at which training stops (required by Zeus)"};
inline constexpr EnvVar kEnvCostThresh{"ZEUS_COST_THRESH", "inf",
                                       "Stop when the next epoch would bring the cost to this (J)"};
inline constexpr EnvVar kEnvMaxEpochs{
    "ZEUS_MAX_EPOCHS", "",
    "At most this many epochs (below the program's own limit): set by zeus tune --policy lean "
    "for a capped try, which then ends as not reached"};
inline constexpr EnvVar kEnvEtaKnob{"ZEUS_ETA_KNOB", "0.5",
                                    "eta in [0, 1]: weight of energy against time in the cost"};
inline constexpr EnvVar kEnvProfileParams{"ZEUS_PROFILE_PARAMS", "10,40",
                                          "Warmup and profiling iterations per power limit"};
inline constexpr EnvVar kEnvUseOptimalPl{
    "ZEUS_USE_OPTIMAL_PL", "true",
    "false: observer mode (profile, report, but train at the maximum limit)"};
inline constexpr EnvVar kEnvMeasureOnly{
    "ZEUS_MEASURE_ONLY", "false",
    "true: measure energy and time at the GPUs' current limits, never change a limit (no "
    "profiling, no profile file; for shared machines and processes without root)"};
inline constexpr EnvVar kEnvPowerLimitPlan{
    "ZEUS_POWER_LIMIT_PLAN", "per_gpu",
    "Data-parallel jobs: per_gpu (each GPU its own limit, so GPUs faster than the slowest do not "
    "wait at the gradient sync at a limit they do not need) or global (Zeus's one limit)"};
// zeus-cpp's: power limits that follow the grid (job/grid_limits.h, docs/grid.md).
inline constexpr EnvVar kEnvCarbonIntensity{
    "ZEUS_CARBON_INTENSITY", "",
    "After profiling, the limit follows carbon intensity: a trace file (CSV "
    "datetime,carbonIntensity or ElectricityMaps JSON) or ElectricityMaps' API URL "
    "(https://api.electricitymap.org/v3, with ZEUS_CARBON_LOCATION)"};
inline constexpr EnvVar kEnvCarbonLocation{
    "ZEUS_CARBON_LOCATION", "", "latitude,longitude asked of ElectricityMaps (e.g. 42.28,-83.74)"};
inline constexpr EnvVar kEnvElectricityPrice{
    "ZEUS_ELECTRICITY_PRICE", "",
    "After profiling, the limit follows the price of electricity: a trace file (CSV "
    "datetime,price_per_kwh)"};
inline constexpr EnvVar kEnvMaxCarbonIntensity{
    "ZEUS_MAX_CARBON_INTENSITY", "grid",
    "gCO2eq/kWh at which the grid rule's choice is Zeus's own: grid (the grid's mean over the last "
    "day), chase (Chase's 750) or a number"};
inline constexpr EnvVar kEnvMaxPrice{
    "ZEUS_MAX_PRICE", "grid",
    "$/kWh at which the grid rule's choice is Zeus's own: grid (the price's mean over the last "
    "day) or a number"};
inline constexpr EnvVar kEnvGridInterval{
    "ZEUS_GRID_INTERVAL", "30m",
    "The grid rule chooses the limit again at least this often (and when the signal moves > 10%)"};
inline constexpr EnvVar kEnvGridPoll{"ZEUS_GRID_POLL", "5m",
                                     "How often the carbon-intensity or price provider is read"};
inline constexpr EnvVar kEnvElectricityMapsToken{
    "ZEUS_ELECTRICITYMAPS_TOKEN", "", "Sent as ElectricityMaps' auth-token header when set"};
inline constexpr EnvVar kEnvElectricityMapsUrl{
    "ZEUS_ELECTRICITYMAPS_URL", "https://api.electricitymap.org/v3",
    "Base URL of ElectricityMaps' API for zeus_cpp.monitor.carbon.ElectrictyMapsClient"};
inline constexpr EnvVar kEnvOpenEiUrl{"ZEUS_OPENEI_URL", "https://api.openei.org",
                                      "Base URL of OpenEI's API for zeus_cpp.monitor.price"};
inline constexpr EnvVar kEnvOpenEiApiKey{
    "ZEUS_OPENEI_API_KEY", "", "OpenEI's API key for zeus_cpp.monitor.price.OpenEIClient"};
inline constexpr EnvVar kEnvDevice{"ZEUS_DEVICE", "auto",
                                   "GPUs zeus::DataLoader controls: auto, nvml, or sim:<gpu>[...]"};
inline constexpr EnvVar kEnvSimClock{
    "ZEUS_SIM_CLOCK", "virtual",
    "Clock of the loader's simulated GPUs: virtual (instant) or real (sleeps)"};
inline constexpr EnvVar kEnvLogLevel{"ZEUS_LOG_LEVEL", "info",
                                     "Log level: trace, debug, info, warn, error, off"};
inline constexpr EnvVar kEnvJournalDir{
    "ZEUS_JOURNAL_DIR", "",
    "Set by zeus run for its workers: where they write power-limit journals, whatever log dir "
    "the program chose (the launcher settles exactly there); unset: the job's log dir"};
inline constexpr EnvVar kEnvRestartCount{
    "ZEUS_RESTART_COUNT", "",
    "Set by zeus run for its workers: TORCHELASTIC_RESTART_COUNT's value"};

// Variables of other programs that zeus-cpp reads.
inline constexpr EnvVar kEnvCudaVisibleDevices{
    "CUDA_VISIBLE_DEVICES", "",
    "The GPUs CUDA shows a process, as CUDA reads it (set but empty: none)"};
inline constexpr EnvVar kEnvCudaDeviceOrder{
    "CUDA_DEVICE_ORDER", "FASTEST_FIRST",
    "How CUDA numbers GPUs: FASTEST_FIRST, or PCI_BUS_ID (NVML's order)"};
// ROCm's: where its libraries are, and which GPUs its runtimes show a process. ROCr filters first
// (indices or UUIDs of the machine's GPUs in HIP's order); HIP_VISIBLE_DEVICES (else
// CUDA_VISIBLE_DEVICES, which HIP also reads) then picks among what ROCr shows.
inline constexpr EnvVar kEnvAmdsmiLibDir{"AMDSMI_LIB_DIR", "",
                                         "A directory searched first for libamd_smi.so"};
inline constexpr EnvVar kEnvRocmPath{
    "ROCM_PATH", "",
    "ROCm's install prefix: its lib/ is the only ROCm directory searched when set"};
inline constexpr EnvVar kEnvRocrVisibleDevices{
    "ROCR_VISIBLE_DEVICES", "", "The AMD GPUs ROCr shows a process (indices or UUIDs)"};
inline constexpr EnvVar kEnvHipVisibleDevices{
    "HIP_VISIBLE_DEVICES", "", "The AMD GPUs HIP shows a process, among ROCr's (indices)"};
// torchrun's worker variables, which zeus run, zeus::distributed::spawn and contract::WorkerEnv
// write and cluster::detect_env reads.
inline constexpr EnvVar kEnvRank{"RANK", "", "torchrun: the worker's global rank"};
inline constexpr EnvVar kEnvLocalRank{"LOCAL_RANK", "", "torchrun: the worker's rank on its node"};
inline constexpr EnvVar kEnvWorldSize{
    "WORLD_SIZE", "", "torchrun's world size (the loader warns when it is ignored)"};
inline constexpr EnvVar kEnvLocalWorldSize{"LOCAL_WORLD_SIZE", "",
                                           "torchrun: workers on the worker's node"};
inline constexpr EnvVar kEnvGroupRank{"GROUP_RANK", "", "torchrun: the node's rank"};
inline constexpr EnvVar kEnvGroupWorldSize{"GROUP_WORLD_SIZE", "", "torchrun: the number of nodes"};
inline constexpr EnvVar kEnvRoleName{"ROLE_NAME", "default", "torchrun: the workers' role"};
inline constexpr EnvVar kEnvRoleRank{"ROLE_RANK", "", "torchrun: the rank within the role"};
inline constexpr EnvVar kEnvRoleWorldSize{"ROLE_WORLD_SIZE", "",
                                          "torchrun: the workers of the role"};
inline constexpr EnvVar kEnvMasterAddr{"MASTER_ADDR", "", "torchrun: the host of rank 0's store"};
inline constexpr EnvVar kEnvMasterPort{"MASTER_PORT", "29500",
                                       "torchrun: the port of rank 0's store"};
inline constexpr EnvVar kEnvTorchelasticRunId{"TORCHELASTIC_RUN_ID", "",
                                              "torchrun: the run id (--rdzv-id)"};
inline constexpr EnvVar kEnvTorchelasticMaxRestarts{"TORCHELASTIC_MAX_RESTARTS", "",
                                                    "torchrun: --max-restarts"};
inline constexpr EnvVar kEnvTorchelasticRestartCount{
    "TORCHELASTIC_RESTART_COUNT", "0", "torchrun: how many times the workers were restarted"};
inline constexpr EnvVar kEnvTorchelasticUseAgentStore{
    "TORCHELASTIC_USE_AGENT_STORE", "False",
    "torchrun: True when its agent serves the store on MASTER_PORT"};
inline constexpr EnvVar kEnvPath{
    "PATH", "/usr/local/bin:/usr/bin:/bin",
    "Where `zeus run` and `zeus tune` look up a program without a '/'"};
inline constexpr EnvVar kEnvSslCertFile{
    "SSL_CERT_FILE", "", "OpenSSL: the CA bundle for https:// (the pip wheel's libcurl reads it)"};
inline constexpr EnvVar kEnvSslCertDir{
    "SSL_CERT_DIR", "", "OpenSSL: a directory of CA certificates for https://, as SSL_CERT_FILE"};
inline constexpr EnvVar kEnvGlibcTunables{
    "GLIBC_TUNABLES", "", "When set, glibc's malloc is the user's to tune, not the loader's"};

// All declared variables, for `--help` texts and docs.
std::span<const EnvVar> all_env_vars();

// The variable's value when set and non-empty, else std::nullopt.
std::optional<std::string> get_env(const EnvVar& var);

// The value when set, even to the empty string (CUDA_VISIBLE_DEVICES='' hides every GPU), else
// std::nullopt. Not logged: the logger itself reads its level with it.
std::optional<std::string> get_env_set(const EnvVar& var);

// A variable another launcher defines, by name: torchrun's, Slurm's and Open MPI's, which
// cluster/ detects (its tables in cluster/env.cpp name them all). Set and non-empty, else
// std::nullopt. Everything else goes through an EnvVar above.
std::optional<std::string> get_launcher_env(std::string_view name);

// The variable's value, or its default when unset or empty.
std::string get_env_or_default(const EnvVar& var);

// Reads one variable of an environment by name: a process's (cluster::process_env), or a map a
// test injects. What cluster/ and contract/ read a worker's environment through.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
// The variable as an int when set; ConfigError naming it when it is not a number.
std::optional<int> lookup_int(const EnvLookup& lookup, std::string_view name);

}  // namespace zeus
