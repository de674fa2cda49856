// The messages of the c10d-style rendezvous (c10d/server.h, c10d/client.h): typed, one JSON object
// per line, each with the protocol version "v" and its "op". Decoding checks the version and every
// field (a missing or mistyped field is an error naming it, never a default), so a peer of
// another version, or a program that is not a rendezvous at all, is told apart at once.
//
// Note [rendezvous protocol], version 2 (1 had no nonces and no signatures). A node's launcher
// (client) and the serving launcher:
//   1. client -> Hello{run_id, nonce, auth}; server -> Welcome{run_id, nonce, auth}, or
//      Refused{reason}: another run, a token on one side only, another protocol version (the
//      refusal names both). With a token, every message after the Hello carries "seq" and "mac"
//      (Note [rendezvous authentication] in c10d/channel.h).
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

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "zeus/common/errors.h"

namespace zeus::launch::c10d {

inline constexpr int kVersion = 2;

// `nonce` and `auth` (the sender has a token) are filled in by the Channel that sends them.
struct Hello {
  std::string run_id;
  std::string nonce;
  bool auth = false;
};
struct Welcome {
  std::string run_id;
  std::string nonce;
  bool auth = false;
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

// A signed message's counter and signature (c10d/channel.h).
struct Seal {
  int64_t seq = 0;
  std::string mac;
};

// One line of JSON, without the newline. Without `seal`, the canonical form that signatures
// cover.
std::string encode(const Message& message, const std::optional<Seal>& seal = std::nullopt);

struct Decoded {
  Message message;
  std::optional<Seal> seal;  // set when the line carries both "seq" and "mac"
};
// A line of another protocol version: the sender runs another zeus-cpp.
class VersionMismatch : public DistError {
 public:
  VersionMismatch(const std::string& what, std::string peer_version)
      : DistError(what), peer_version_(std::move(peer_version)) {}
  const std::string& peer_version() const { return peer_version_; }

 private:
  std::string peer_version_;  // as the line wrote it ("1", or "(none)")
};
// Throws VersionMismatch for another version, DistError naming any other problem (not JSON, an
// unknown op, a missing or mistyped field), both quoting the start of the line.
Decoded decode_sealed(std::string_view line);
Message decode(std::string_view line);

}  // namespace zeus::launch::c10d
