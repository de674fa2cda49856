#include "zeusd_cli.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <iostream>

#include "zeus/common/atomic_file.h"
#include "zeus/common/build_info.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/parse.h"
#include "zeus/common/secret_file.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/daemon/daemon.h"
#include "zeus/daemon/token.h"

namespace zeus::zeusd {

namespace {

// A uid or gid given as a number or a name (getpwnam/getgrnam: the CLI's thread only).
unsigned resolve_id(const std::string& text, std::string_view flag, bool group) {
  if (const auto n = parse_number<unsigned>(text)) {
    return *n;
  }
  if (group) {
    if (const struct group* g = ::getgrnam(text.c_str())) {
      return g->gr_gid;
    }
  } else if (const struct passwd* p = ::getpwnam(text.c_str())) {
    return p->pw_uid;
  }
  throw ConfigError(
      fmt::format("{} '{}': no such {} on this host; give a number or an existing "
                  "name",
                  flag, text, group ? "group" : "user"));
}

struct ServeFlags {
  std::string mode = "uds";
  std::string socket_path = "/run/zeusd/zeusd.sock";
  std::string socket_permissions = "666";
  std::optional<std::string> socket_uid;  // a number, as upstream's, or a user name
  std::optional<std::string> socket_gid;  // a number, or a group name
  std::string tcp_bind_address = "127.0.0.1:4938";
  std::optional<unsigned> num_workers;
  double gpu_power_poll_hz = 20;
  double cpu_power_poll_hz = 10;
  std::string gpu_backend = "auto";
  std::string enable = "gpu-control,gpu-read,cpu-read";
  std::string gpu_command_overrides;
  std::string signing_key_path;
  std::string state_dir = "/var/lib/zeusd";
  bool require_gpu_process = false;
  bool check = false;
  unsigned max_connections = 256;
  unsigned idle_timeout_s = 30;
  std::string log_level = "info";
  std::string metrics_bind_address;
  std::string metrics_token_file;
  unsigned metrics_period_ms = 1000;
  std::string kubelet_socket;
  unsigned kubelet_period_ms = 5000;
  std::string kubelet_device_checkpoint;
  std::string admin_token_file;
};

struct TokenFlags {
  std::string signing_key_path;
  std::string user;
  std::string scope;
  std::string expires = "30d";
};

// The HMAC key: the file's raw bytes, trailing newline included (as upstream).
std::string read_key(const std::string& path) {
  return read_secret_key_file(path, "signing key file");
}

daemon::DaemonOptions to_options(const ServeFlags& f) {
  daemon::DaemonOptions o;
  if (f.mode == "uds") {
    o.server.mode = http::ServerOptions::Mode::kUnixSocket;
  } else if (f.mode == "tcp") {
    o.server.mode = http::ServerOptions::Mode::kTcp;
  } else {
    throw ConfigError(fmt::format(
        "--mode {}: this zeusd serves 'uds' (a Unix socket) or 'tcp' (named pipes are Windows')",
        f.mode));
  }
  o.server.socket_path = f.socket_path;
  const auto perms = f.socket_permissions.find_first_not_of("01234567") == std::string::npos &&
                             !f.socket_permissions.empty() && f.socket_permissions.size() <= 4
                         ? std::optional<unsigned>(std::stoul(f.socket_permissions, nullptr, 8))
                         : std::nullopt;
  if (!perms) {
    throw ConfigError(fmt::format("--socket-permissions '{}' is not an octal mode such as 660",
                                  f.socket_permissions));
  }
  o.server.socket_permissions = static_cast<mode_t>(*perms);
  if (f.socket_uid) {
    o.server.socket_uid = resolve_id(*f.socket_uid, "--socket-uid", false);
  }
  if (f.socket_gid) {
    o.server.socket_gid = resolve_id(*f.socket_gid, "--socket-gid", true);
  }
  o.server.tcp_address = f.tcp_bind_address;
  o.server.max_connections = f.max_connections;
  o.server.idle_timeout = std::chrono::seconds(f.idle_timeout_s);
  o.gpu_backend = daemon::check_gpu_backend(f.gpu_backend);
  o.api.gpu_control = o.api.gpu_read = o.api.cpu_read = false;
  for (const auto& g : split(f.enable, ',')) {
    if (g == daemon::kGroupGpuControl) {
      o.api.gpu_control = true;
    } else if (g == daemon::kGroupGpuRead) {
      o.api.gpu_read = true;
    } else if (g == daemon::kGroupCpuRead) {
      o.api.cpu_read = true;
    } else {
      throw ConfigError(
          fmt::format("--enable: unknown API group '{}' (gpu-control, gpu-read, cpu-read)", g));
    }
  }
  o.gpu_command_overrides = f.gpu_command_overrides;
  o.metrics.bind_address = f.metrics_bind_address;
  o.metrics.token_file = f.metrics_token_file;
  o.metrics.period = std::chrono::milliseconds(f.metrics_period_ms);
  o.kubelet_socket = f.kubelet_socket;
  o.kubelet_period = std::chrono::milliseconds(f.kubelet_period_ms);
  o.kubelet_device_checkpoint = f.kubelet_device_checkpoint;
  o.admin_token_file = f.admin_token_file;
  if (!f.signing_key_path.empty()) {
    o.api.signing_key = read_key(f.signing_key_path);
  }
  if (f.gpu_power_poll_hz <= 0 || f.cpu_power_poll_hz <= 0) {
    throw ConfigError("--gpu-power-poll-hz and --cpu-power-poll-hz must be positive");
  }
  o.api.cpu_poll_hz = f.cpu_power_poll_hz;
  o.streams = {f.gpu_power_poll_hz, f.cpu_power_poll_hz};
  o.state_dir = f.state_dir;
  o.require_gpu_process = f.require_gpu_process;
  return o;
}

int serve(const ServeFlags& f, std::ostream& out) {
  logger().set_level(spdlog::level::from_str(f.log_level));
  daemon::DaemonOptions options = to_options(f);
  if (f.check) {
    const daemon::Inventory inv = daemon::inspect(options);
    for (const auto& line : inv.lines) {
      out << line << "\n";
    }
    return inv.ok ? kExitOk : kExitFailure;
  }
  if (f.num_workers) {
    logger().info("zeusd: --num-workers {} noted; each connection has a thread of its own",
                  *f.num_workers);
  }
  SignalPipe signals({SIGTERM, SIGINT, SIGHUP});
  std::signal(SIGPIPE, SIG_IGN);
  daemon::Daemon d(std::move(options));
  int sig = 0;
  while (sig == 0) {  // 0: poll was interrupted (by the very signal, whose byte is then next)
    sig = signals.wait_for(std::chrono::nanoseconds(-1));
  }
  logger().info("zeusd: signal {}: stopping; leases stay in the journal for the next start", sig);
  return kExitOk;
}

int issue(const TokenFlags& f, std::ostream& out) {
  daemon::TokenClaims claims;
  claims.sub = f.user;
  for (const auto& s : split(f.scope, ',')) {
    if (!daemon::is_api_group(s)) {
      throw ConfigError(
          fmt::format("--scope: unknown API group '{}' (gpu-control, gpu-read, cpu-read)", s));
    }
    claims.scopes.push_back(s);
  }
  if (const auto life = daemon::parse_token_lifetime(f.expires)) {
    claims.exp = std::chrono::duration_cast<std::chrono::seconds>(
                     (std::chrono::system_clock::now() + *life).time_since_epoch())
                     .count();
  }
  out << daemon::issue_token(read_key(f.signing_key_path), claims) << "\n";
  return kExitOk;
}

}  // namespace

int run_zeusd(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"zeusd: the zeus-cpp node daemon (Zeus 0.16's zeusd API, with leases)", "zeusd"};
  std::string version = version_text("zeusd");
  version.pop_back();  // CLI11 ends it with its own newline
  app.set_version_flag("--version", version);
  app.require_subcommand(1);
  ServeFlags s;
  CLI::App* serve_cmd = app.add_subcommand("serve", "serve the API until SIGTERM");
  serve_cmd->add_option("--mode", s.mode, "uds or tcp")->capture_default_str();
  serve_cmd->add_option("--socket-path", s.socket_path)->capture_default_str();
  serve_cmd->add_option("--socket-permissions", s.socket_permissions, "octal")
      ->capture_default_str();
  serve_cmd->add_option("--socket-uid", s.socket_uid);
  serve_cmd->add_option("--socket-gid", s.socket_gid);
  serve_cmd->add_option("--tcp-bind-address", s.tcp_bind_address)->capture_default_str();
  serve_cmd->add_option("--num-workers", s.num_workers);
  serve_cmd->add_option("--gpu-power-poll-hz", s.gpu_power_poll_hz)->capture_default_str();
  serve_cmd->add_option("--cpu-power-poll-hz", s.cpu_power_poll_hz)->capture_default_str();
  serve_cmd->add_option("--gpu-backend", s.gpu_backend)->capture_default_str();
  serve_cmd->add_option("--enable", s.enable, "comma list of API groups")->capture_default_str();
  serve_cmd->add_option("--gpu-command-overrides", s.gpu_command_overrides);
  serve_cmd->add_option("--signing-key-path", s.signing_key_path, "HS256 key: turns auth on");
  serve_cmd->add_option("--state-dir", s.state_dir, "lease journal and audit log")
      ->capture_default_str();
  serve_cmd->add_flag("--require-gpu-process", s.require_gpu_process,
                      "a user may change only GPUs its processes run on");
  serve_cmd->add_flag("--check", s.check, "print what this machine offers and exit");
  serve_cmd->add_option("--max-connections", s.max_connections)->capture_default_str();
  serve_cmd->add_option("--idle-timeout-s", s.idle_timeout_s)->capture_default_str();
  serve_cmd->add_option("--log-level", s.log_level)->capture_default_str();
  serve_cmd->add_option("--metrics-bind-address", s.metrics_bind_address,
                        "HOST:PORT: serve GET /metrics for Prometheus there (off when not given)");
  serve_cmd->add_option("--metrics-token-file", s.metrics_token_file,
                        "a file holding the bearer token scrapes must send (mode 600)");
  serve_cmd
      ->add_option("--metrics-period-ms", s.metrics_period_ms,
                   "how often the metrics sampler reads the devices")
      ->capture_default_str()
      ->check(CLI::Range(10u, 3600000u));
  serve_cmd->add_option("--kubelet-socket", s.kubelet_socket,
                        "the kubelet's pod-resources socket "
                        "(/var/lib/kubelet/pod-resources/kubelet.sock): metrics, audit lines and "
                        "job-energy records name each GPU's pod, and each pod gets a record");
  serve_cmd->add_option("--kubelet-period-ms", s.kubelet_period_ms, "how often the kubelet is read")
      ->capture_default_str()
      ->check(CLI::Range(100u, 600000u));
  serve_cmd->add_option("--kubelet-device-checkpoint", s.kubelet_device_checkpoint,
                        "the kubelet's device-manager checkpoint "
                        "(/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint): a client "
                        "in a pod may change only the GPUs the kubelet gave that pod");
  serve_cmd->add_option("--admin-token-file", s.admin_token_file,
                        "zeusd's admin credential (made when missing; default: STATE_DIR/"
                        "admin.token): a request sending it may end leases and job records");

  TokenFlags t;
  CLI::App* token_cmd = app.add_subcommand("token", "bearer tokens");
  token_cmd->require_subcommand(1);
  CLI::App* issue_cmd = token_cmd->add_subcommand("issue", "print a signed token");
  issue_cmd->add_option("--signing-key-path", t.signing_key_path)->required();
  issue_cmd->add_option("--user", t.user)->required();
  issue_cmd->add_option("--scope", t.scope, "comma list of API groups")->required();
  issue_cmd->add_option("--expires", t.expires, "1h, 7d, 30d, never")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (serve_cmd->parsed()) {
      return serve(s, out);
    }
    return issue(t, out);
  } catch (const ConfigError& e) {
    err << "zeusd: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << "zeusd: error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace zeus::zeusd
