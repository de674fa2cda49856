// The pieces of elastic `zeus run` between the command line and the rendezvous: torchrun's
// --rdzv-conf keys as RendezvousOptions, and a closed round applied to a node's launch plan
// (its workers' ranks, world and master, as torchrun's elastic agent sets them). Pure functions.
#pragma once

#include <string>

#include "zeus/launch/launch_options.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch {

// "join_timeout=600,last_call_timeout=30,read_timeout=60" (seconds, fractions allowed) onto
// `options`: join_timeout and last_call_timeout as torchrun's; read_timeout is how long a node
// may stay silent (no heartbeat) before it counts as gone. Throws ConfigError naming an
// unknown key (with the supported ones) or a bad value.
void apply_rdzv_conf(const std::string& conf, RendezvousOptions& options);

// Rewrites `plan` for `round`: node rank and count, world size, master address and port, and
// every worker's rank and set_world_env() variables; the restart count comes with the attempt
// (attempt_env). Throws
// InternalError when the round's world does not fit the plan's workers.
void apply_round(LaunchPlan& plan, const RendezvousRound& round);

// The elastic part of resolve(): the endpoint (--rdzv-endpoint, default port 29400 as
// torchrun's), whether it is this host, this node's address (--local-addr, else the host name),
// the rendezvous options (--rdzv-id, default "none" as torchrun's; --max-restarts;
// --rdzv-conf). Throws ConfigError for a bad --rdzv-conf.
ElasticPlan resolve_elastic(const LaunchOptions& options, int min_nodes, int max_nodes);

// Whether `host` names this machine: loopback, its host name, or one of its interfaces' addresses.
bool is_this_host(const std::string& host);

}  // namespace zeus::launch
