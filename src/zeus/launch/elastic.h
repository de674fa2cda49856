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
// every worker's RANK, WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT; the restart count comes with the attempt (attempt_env). Throws
// InternalError when the round's world does not fit the plan's workers.
void apply_round(LaunchPlan& plan, const RendezvousRound& round);

}  // namespace zeus::launch
