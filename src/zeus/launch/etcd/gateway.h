// etcd v3 through its JSON gateway (`/v3/kv/*`, `/v3/lease/*`, `/v3/watch`, `/v3/auth/*`; etcd
// 3.4 and later), over libcurl: the calls the etcd rendezvous makes, with failover between the
// cluster's members, TLS and etcd's user authentication passed through.
//
// Failover: a call goes to the current endpoint; a transport error, a time-out, or an answer
// that the member cannot serve it now (no leader, leader changed: gRPC Unavailable) moves to the
// next endpoint, until every endpoint was tried once; then EtcdUnavailable. So a cluster that
// lost a minority of its members answers on the next call, and the caller decides when silence
// has lasted too long. Keys and values are bytes (base64 on the wire).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch::etcd {

// No endpoint answered: `what` names them all and the last error.
class EtcdUnavailable : public DistError {
 public:
  using DistError::DistError;
};
// etcd answered with an error that trying again will not mend (permission denied, a bad
// request): `what` names etcd's message and what to do.
class EtcdRefused : public DistError {
 public:
  using DistError::DistError;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0: none
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision the result is at
  std::vector<KeyValue> kvs;
};

// An equality test of a transaction, over one key or every key of [key, range_end): etcd holds
// it for an absent key as for one whose revision is 0.
struct Compare {
  enum class Target { kCreate, kMod } target = Target::kMod;
  std::string key;
  std::string range_end;  // empty: `key` alone
  int64_t revision = 0;
};

struct Op {
  enum class Kind { kPut, kDelete, kRange } kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: 0 for none
  std::string range_end;  // kDelete and kRange: empty for `key` alone
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;             // the store's revision after the transaction
  std::vector<RangeResult> ranges;  // the kRange ops' results of the branch that ran, in order
};

struct WatchEvent {
  bool deleted = false;
  KeyValue kv;  // a deletion carries the key and its mod_revision (the deletion's) only
};

struct GatewayOptions {
  EtcdOptions etcd;
  // One call's time on one endpoint (connecting included) before the next endpoint is tried.
  std::chrono::milliseconds request_timeout{1'500};
};

// The smallest key greater than every key that starts with `prefix`: a prefix's range end.
std::string prefix_end(const std::string& prefix);

// Contract: the unary calls may come from several threads (they are serialized); a Watch runs
// on a thread of its own and calls back from it. The gateway outlives its watches.
class Gateway {
 public:
  // Throws ConfigError for no endpoints, or in a build of zeus-cpp without libcurl.
  explicit Gateway(GatewayOptions options);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  RangeResult range(const std::string& key, const std::string& range_end = "");
  TxnResult txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                const std::vector<Op>& failure);

  struct Lease {
    int64_t id = 0;
    std::chrono::seconds ttl{0};  // as granted: etcd raises a TTL below its minimum
  };
  Lease grant(std::chrono::seconds ttl);
  // The lease's remaining TTL after the refresh; nullopt when etcd no longer has it.
  std::optional<std::chrono::seconds> keep_alive(int64_t lease);
  // The lease's remaining TTL without refreshing it; nullopt when etcd no longer has it.
  std::optional<std::chrono::seconds> time_to_live(int64_t lease);
  // Ends the lease and deletes its keys; a lease already gone is no error.
  void revoke(int64_t lease);

  // "a:2379, b:2379" (with the protocol), for messages.
  std::string endpoints_text() const;
  // Bumped whenever calls move to another endpoint: a watch of the old one should follow.
  uint64_t endpoint_epoch() const;
  // When some endpoint last answered (a success or etcd's own error); the epoch when never.
  std::chrono::steady_clock::time_point last_answer() const;
  bool ever_answered() const;

  // A watch of [key, range_end) from `start_revision` on the current endpoint, on a connection
  // of its own. `on_events` gets each batch of events with the revision it reaches, from the
  // watch's thread; `ended()` says why the stream stopped (the endpoint went away, etcd
  // cancelled it: compacted, ...), after which nothing more is delivered.
  class Watch {
   public:
    virtual ~Watch() = default;
    virtual std::optional<std::string> ended() const = 0;
  };
  using OnEvents = std::function<void(const std::vector<WatchEvent>&, int64_t revision)>;
  std::unique_ptr<Watch> watch(const std::string& key, const std::string& range_end,
                               int64_t start_revision, OnEvents on_events,
                               std::function<void()> on_end);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::launch::etcd
