// The etcd rendezvous's copy of the run's keys (Mirror: a range read, then a watch from the
// revision after it), and what the round logic sees in it (RecordReader: decoded, signatures
// checked, what is wrong with a record logged once per write of it).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "zeus/launch/etcd/gateway.h"
#include "zeus/launch/etcd/records.h"
#include "zeus/launch/etcd/round_logic.h"
#include "zeus/launch/refusal_log.h"

namespace zeus::launch::etcd {

// Contract: one thread (the agent's); the watch's thread only queues events and calls `wake`.
class Mirror {
 public:
  Mirror(Gateway& gateway, std::string prefix, std::function<void()> wake);
  ~Mirror();

  // Reads every key of the run and watches from the next revision. Throws what the gateway
  // throws.
  void resync();
  // Applies what the watch delivered since; false when the mirror must resync (the watch ended,
  // or the gateway moved to another endpoint than the watch's).
  bool pump();
  // This node's own writes, applied at once (the watch brings them again later).
  void put(KeyValue kv);
  void erase(const std::string& key, int64_t revision);
  // Every key of the run as etcd had them at `all.revision` (a transaction's read): what the
  // mirror holds that is older and not among them was deleted.
  void replace(const RangeResult& all);

  const KeyValue* find(const std::string& key) const;
  // Every key that starts with `prefix`.
  std::vector<const KeyValue*> under(const std::string& prefix) const;
  bool synced() const { return watch_ != nullptr; }

 private:
  void apply(const WatchEvent& e);

  Gateway& gateway_;
  std::string prefix_;
  std::function<void()> wake_;
  std::map<std::string, KeyValue> kvs_;
  // Deleted keys and when: an older put arriving later (the watch lags this node's own
  // writes and the transactions' answers) does not bring them back.
  std::map<std::string, int64_t> deleted_at_;
  std::unique_ptr<Gateway::Watch> watch_;
  uint64_t watch_epoch_ = 0;
  std::mutex mu_;  // the queue, filled by the watch's thread
  std::vector<WatchEvent> queue_;
};

// Contract: one thread (the agent's).
class RecordReader {
 public:
  RecordReader(Keys keys, std::optional<std::string> token, std::string what);

  // The view of `mirror` for this node (`me_id`, in generation `my_generation`, whose lease is
  // `my_lease`), with `vouched` members.
  View view(const Mirror& mirror, const std::string& me_id, const std::string& my_generation,
            int64_t my_lease, const std::set<std::string>& vouched);
  // The lease a node's last valid record named (to ask etcd whether it lives), 0 when unknown.
  int64_t last_lease(const std::string& id) const;

 private:
  const std::optional<NodeRecord>& node(const KeyValue& kv);
  void note(const std::string& key, int64_t revision, const std::string& problem);

  Keys keys_;
  std::optional<std::string> token_;
  RefusalLog log_;
  // Decoded records by key, with the revision they were decoded at.
  std::map<std::string, std::pair<int64_t, std::optional<NodeRecord>>> cache_;
  std::map<std::string, int64_t> leases_;            // node id -> its last record's lease
  std::set<std::pair<std::string, int64_t>> noted_;  // problems logged: (key, mod_revision)
};

}  // namespace zeus::launch::etcd
