// The pieces of elastic `zeus run` between the command line and the rendezvous: torchrun's
// --rdzv-conf keys as RendezvousOptions, a closed round applied to a node's launch plan (its
// workers' ranks, world and master, as torchrun's elastic agent sets them), and the backend the
// plan names. Pure functions but make_rendezvous().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zeus/launch/launch_options.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch {

// "join_timeout=600,last_call_timeout=30,read_timeout=60,token_file=PATH" onto `options`:
// join_timeout and last_call_timeout (seconds, fractions allowed) as torchrun's; read_timeout is
// how long a node may stay silent before it counts as gone; token_file (else
// ZEUS_RDZV_TOKEN_FILE) the shared secret. With `etcd`, also torchrun's etcd keys protocol
// (http|https), cacert, cert, key and timeout (= join_timeout), and etcd's user with
// password_file. Throws ConfigError naming an unknown key (with the supported ones), a bad
// value, a key of the other backend, or a secret file that is missing, empty or readable by
// others.
void apply_rdzv_conf(const std::string& conf, RendezvousOptions& options, bool etcd = false);

// --rdzv-backend etcd's --rdzv-endpoint: "HOST[:PORT][,HOST[:PORT]...]" (port 2379 by default)
// as "HOST:PORT" each. Throws ConfigError for an empty list or a bad entry.
std::vector<std::string> parse_etcd_endpoints(const std::string& text);

// etcd, or torchrun's other name for an etcd rendezvous (etcd-v2): zeus run's etcd backend.
bool is_etcd_backend(const std::string& backend);

// Rewrites `plan` for `round`: node rank and count, world size, master address and port, and
// every worker's rank and set_world_env() variables; the restart count comes with the attempt
// (attempt_env). Throws
// InternalError when the round's world does not fit the plan's workers.
void apply_round(LaunchPlan& plan, const RendezvousRound& round);

// The elastic part of resolve(): the backend; c10d's endpoint (--rdzv-endpoint, default port
// 29400 as torchrun's) and whether it is this host, or etcd's endpoints; this node's address
// (--local-addr, else the host name); the rendezvous options (--rdzv-id, default "none" as
// torchrun's; --max-restarts; --rdzv-conf). Throws ConfigError for a bad --rdzv-conf or
// endpoint.
ElasticPlan resolve_elastic(const LaunchOptions& options, int min_nodes, int max_nodes);

// The backend the plan names, for a node of `nproc` workers. Throws what its constructor throws.
std::unique_ptr<Rendezvous> make_rendezvous(const ElasticPlan& plan, int nproc,
                                            std::function<void(const std::string&)> say);

// Whether `host` names this machine: loopback, its host name, or one of its interfaces' addresses.
bool is_this_host(const std::string& host);

}  // namespace zeus::launch
