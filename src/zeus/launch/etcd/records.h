// What the etcd rendezvous keeps in etcd, and how: its keys, the run's state and the nodes'
// records as JSON, each signed for its key with the run's token (rendezvous_auth.h).
//
// Note [etcd rendezvous keys]
//   /zeus/rdzv/<run id>/state             the run's state (RunState): no lease, changed only
//                                         by compare-and-swap on its mod_revision
//   /zeus/rdzv/<run id>/g/<gen>/<node id> a node's record (NodeRecord), bound to the lease its
//                                         launcher keeps alive (TTL = read_timeout): it goes
//                                         when the launcher ends or falls silent
// <gen> is the run's generation, a random id drawn when a run starts under the id: records of
// an earlier run under the same id live under another generation and are ignored. The run id
// is percent-encoded where it holds '/', '%' or bytes outside printable ASCII, so that two run
// ids never share a key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/launch/etcd/gateway.h"

namespace zeus::launch::etcd {

// The format of the records; a launcher of another format is refused, both versions named.
inline constexpr int kRecordVersion = 1;

struct Keys {
  explicit Keys(const std::string& run_id);
  std::string prefix;  // every key of the run starts with it
  std::string state() const { return prefix + "state"; }
  std::string nodes(const std::string& generation) const {
    return prefix + "g/" + generation + "/";
  }
  std::string node(const std::string& generation, const std::string& id) const {
    return nodes(generation) + id;
  }
};

// A node in a closed round, in node-rank order.
struct Member {
  std::string id;
  std::string host;
  int nproc = 1;
  int link_port = 0;  // where its liveness link listens (etcd/link.h)
  bool operator==(const Member&) const = default;
};

enum class Phase { kOpen, kClosed, kFinished, kAborted };
std::string_view phase_name(Phase phase);

struct RunState {
  std::string generation;
  // Grows by one with every write of the state: within a generation, a state with a smaller
  // step is an old one written back (a replay), and is repaired.
  int64_t step = 1;
  int round = 0;  // kOpen: the round being formed; kClosed on: the round that closed
  Phase phase = Phase::kOpen;
  int failures = 0;
  std::string reason;           // why the last round ended, or why the run was aborted
  std::vector<Member> members;  // kClosed, kFinished: the round's nodes
  std::string master_addr;      // node 0's host and the port it found free at the close
  int master_port = 0;
  std::vector<std::string> done;  // members whose workers all exited 0
  bool operator==(const RunState&) const = default;
};

struct NodeRecord {
  std::string host;
  int nproc = 1;
  int link_port = 0;
  int want = 0;       // the round it waits for (or, once in it, runs)
  int64_t lease = 0;  // signed: the record counts only under this lease
  // From etcd, not part of the value: when it was last written (the join order).
  int64_t mod_revision = 0;
};

enum class RecordStatus {
  kValid,
  kMalformed,     // not JSON, or a field missing or mistyped
  kOtherVersion,  // written by a zeus-cpp of another record format
  kUnsigned,      // this node has a token and the record no signature
  kSigned,        // the record is signed and this node has no token
  kBadSignature,  // signed with another token, for another key, or changed since
  kWrongLease,    // valid, but put under another lease than the one it names
};

template <class T>
struct Decoded {
  RecordStatus status = RecordStatus::kMalformed;
  std::optional<T> record;  // set for kValid
  std::string problem;      // what is wrong, for a message; empty for kValid
};

std::string encode_state(const RunState& state, const std::string& key,
                         const std::optional<std::string>& secret);
std::string encode_node(const NodeRecord& node, const std::string& key,
                        const std::optional<std::string>& secret);
Decoded<RunState> decode_state(const std::string& value, const std::string& key,
                               const std::optional<std::string>& secret);
// Checks, besides the signature, that the record lives by the lease it names.
Decoded<NodeRecord> decode_node(const KeyValue& kv, const std::optional<std::string>& secret);

}  // namespace zeus::launch::etcd
