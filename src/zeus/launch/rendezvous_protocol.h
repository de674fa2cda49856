// The messages of the c10d-style rendezvous (launch/rendezvous.h): typed, one JSON object per
// line, each with the protocol version "v" and its "op". Decoding checks the version and every
// field (a missing or mistyped field is an error naming it, never a default), so a peer of
// another version, or a program that is not a rendezvous at all, is told apart at once.
//
// Note [rendezvous protocol], version 1. A node's launcher (client) and the serving launcher:
//   1. client -> Hello{run_id}; server -> Welcome{run_id}, or Refused{reason} (another run).
//   2. client -> Join{host, nproc}; server -> Waiting{joined, min, max} to every waiting node
//      whenever that count changes.
//   3. The round closes (MAX joined, or MIN and `last_call` without a newcomer): the server
//      asks the first node (node 0: it hosts the workers' store) PortRequest{round}; it answers
//      PortReply{round, port} with a port it found free just then; every member then gets
//      Round{...}. Picking the port at close, not at join, keeps the window in which another
//      program can take it to the few milliseconds before the workers start.
//   4. While the round runs: Heartbeat from every client (the server drops one silent for
//      keep_alive); Failed{reason} or Done from a member; the server ends the round with
//      Restart{reason} (clients go back to 2) or the run with Abort{reason}.
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace zeus::launch::rdzv {

inline constexpr int kVersion = 1;

struct Hello {
  std::string run_id;
};
struct Welcome {
  std::string run_id;
};
struct Refused {
  std::string reason;
};
struct Join {
  std::string host;  // how the other nodes reach this one
  int nproc = 0;
};
struct Waiting {
  int joined = 0;
  int min_nodes = 0;
  int max_nodes = 0;
};
struct PortRequest {
  int round = 0;
};
struct PortReply {
  int round = 0;
  int port = 0;
};
struct Round {
  int round = 0;
  int node_rank = 0;
  int nnodes = 0;
  int world_size = 0;
  int first_rank = 0;
  std::string master_addr;
  int master_port = 0;
};
struct Heartbeat {};
struct Failed {
  std::string reason;
};
struct Done {};
struct Restart {
  std::string reason;
};
struct Abort {
  std::string reason;
};

using Message = std::variant<Hello, Welcome, Refused, Join, Waiting, PortRequest, PortReply, Round,
                             Heartbeat, Failed, Done, Restart, Abort>;

// The message's "op", e.g. "join".
std::string_view op_name(const Message& message);
// One line of JSON, without the newline.
std::string encode(const Message& message);
// Throws DistError naming the problem (not JSON, another version, an unknown op, a missing or
// mistyped field) and quoting the start of the line.
Message decode(std::string_view line);

}  // namespace zeus::launch::rdzv
