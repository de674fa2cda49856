#include "zeus/launch/etcd/mirror.h"

#include <fmt/format.h>

namespace zeus::launch::etcd {

Mirror::Mirror(Gateway& gateway, std::string prefix, std::function<void()> wake)
    : gateway_(gateway), prefix_(std::move(prefix)), wake_(std::move(wake)) {}

Mirror::~Mirror() {
  watch_.reset();  // its thread ends before the queue it fills
}

void Mirror::resync() {
  watch_.reset();
  {
    std::lock_guard lock(mu_);
    queue_.clear();
  }
  const uint64_t epoch = gateway_.endpoint_epoch();
  const RangeResult all = gateway_.range(prefix_, prefix_end(prefix_));
  kvs_.clear();
  deleted_at_.clear();
  replace(all);
  watch_ = gateway_.watch(
      prefix_, prefix_end(prefix_), all.revision + 1,
      [this](const std::vector<WatchEvent>& events, int64_t) {
        {
          std::lock_guard lock(mu_);
          queue_.insert(queue_.end(), events.begin(), events.end());
        }
        wake_();
      },
      wake_);
  watch_epoch_ = epoch;
}

bool Mirror::pump() {
  if (!watch_) {
    return false;
  }
  std::vector<WatchEvent> events;
  {
    std::lock_guard lock(mu_);
    events.swap(queue_);
  }
  for (const WatchEvent& e : events) {
    apply(e);
  }
  return !watch_->ended() && gateway_.endpoint_epoch() == watch_epoch_;
}

void Mirror::apply(const WatchEvent& e) {
  if (e.deleted) {
    erase(e.kv.key, e.kv.mod_revision);
  } else {
    put(e.kv);
  }
}

void Mirror::put(KeyValue kv) {
  if (const auto d = deleted_at_.find(kv.key); d != deleted_at_.end()) {
    if (d->second >= kv.mod_revision) {
      return;  // deleted after this write
    }
    deleted_at_.erase(d);
  }
  const auto it = kvs_.find(kv.key);
  if (it == kvs_.end() || it->second.mod_revision <= kv.mod_revision) {
    kvs_[kv.key] = std::move(kv);
  }
}

void Mirror::erase(const std::string& key, int64_t revision) {
  const auto it = kvs_.find(key);
  if (it != kvs_.end() && it->second.mod_revision > revision) {
    return;  // written again after this deletion
  }
  if (it != kvs_.end()) {
    kvs_.erase(it);
  }
  deleted_at_[key] = std::max(deleted_at_[key], revision);
}

void Mirror::replace(const RangeResult& all) {
  std::set<std::string> present;
  for (const KeyValue& kv : all.kvs) {
    present.insert(kv.key);
    put(kv);
  }
  std::vector<std::string> gone;
  for (const auto& [key, kv] : kvs_) {
    if (present.count(key) == 0 && kv.mod_revision <= all.revision) {
      gone.push_back(key);
    }
  }
  for (const std::string& key : gone) {
    erase(key, all.revision);
  }
}

const KeyValue* Mirror::find(const std::string& key) const {
  const auto it = kvs_.find(key);
  return it == kvs_.end() ? nullptr : &it->second;
}

std::vector<const KeyValue*> Mirror::under(const std::string& prefix) const {
  std::vector<const KeyValue*> out;
  for (auto it = kvs_.lower_bound(prefix); it != kvs_.end() && it->first.starts_with(prefix);
       ++it) {
    out.push_back(&it->second);
  }
  return out;
}

RecordReader::RecordReader(Keys keys, std::optional<std::string> token, std::string what)
    : keys_(std::move(keys)), token_(std::move(token)), log_(std::move(what)) {}

void RecordReader::note(const std::string& key, int64_t revision, const std::string& problem) {
  if (noted_.insert({key, revision}).second) {
    log_.refused(fmt::format("the record at {}", key), fmt::format("ignored: {}", problem));
  }
}

const std::optional<NodeRecord>& RecordReader::node(const KeyValue& kv) {
  auto& entry = cache_[kv.key];
  if (entry.first != kv.mod_revision || kv.mod_revision == 0) {
    const Decoded<NodeRecord> d = decode_node(kv, token_);
    entry = {kv.mod_revision, d.record};
    if (!d.record) {
      note(kv.key, kv.mod_revision, d.problem);
    }
  }
  return entry.second;
}

View RecordReader::view(const Mirror& mirror, const std::string& me_id,
                        const std::string& my_generation, int64_t my_lease,
                        const std::set<std::string>& vouched) {
  View v;
  v.vouched = vouched;
  if (const KeyValue* state = mirror.find(keys_.state())) {
    v.state_present = true;
    v.state_mod_revision = state->mod_revision;
    Decoded<RunState> d = decode_state(state->value, state->key, token_);
    v.state_status = d.status;
    v.state_problem = d.problem;
    v.state = std::move(d.record);
    if (!v.state) {
      note(state->key, state->mod_revision, d.problem);
    }
  }
  if (v.state) {
    const std::string nodes = keys_.nodes(v.state->generation);
    for (const KeyValue* kv : mirror.under(nodes)) {
      const std::string id = kv->key.substr(nodes.size());
      if (const auto& record = node(*kv)) {
        v.nodes[id] = *record;
        leases_[id] = record->lease;
      }
    }
  }
  if (!my_generation.empty() && my_lease != 0) {
    const KeyValue* mine = mirror.find(keys_.node(my_generation, me_id));
    v.my_record_alive = mine != nullptr && mine->lease == my_lease;
  }
  if (cache_.size() > 4 * (v.nodes.size() + 16)) {
    cache_.clear();  // records of earlier generations and departed nodes
  }
  return v;
}

int64_t RecordReader::last_lease(const std::string& id) const {
  const auto it = leases_.find(id);
  return it == leases_.end() ? 0 : it->second;
}

}  // namespace zeus::launch::etcd
