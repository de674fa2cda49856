#include "zeus/launch/etcd/records.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "zeus/launch/rendezvous_auth.h"

namespace zeus::launch::etcd {
namespace {

using json = nlohmann::json;

// A field that is missing or of the wrong type: the record is malformed.
struct Missing {
  std::string what;
};

int64_t integer(const json& j, const char* name, int64_t min, int64_t max) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer() || *it < min || *it > max) {
    throw Missing{fmt::format("'{}' (an integer in {}..{})", name, min, max)};
  }
  return it->get<int64_t>();
}

int small(const json& j, const char* name, int min = 0) {
  return static_cast<int>(integer(j, name, min, std::numeric_limits<int>::max()));
}

std::string text(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_string()) {
    throw Missing{fmt::format("'{}' (a string)", name)};
  }
  return it->get<std::string>();
}

const json& array(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_array()) {
    throw Missing{fmt::format("'{}' (a list)", name)};
  }
  return *it;
}

std::string seal(json body, const std::string& key, const std::optional<std::string>& secret) {
  body["v"] = kRecordVersion;
  if (secret) {
    body["mac"] = sign_record(secret, key, body.dump());
  }
  return body.dump();
}

// Parses `value` and checks its version and signature; the body (without "mac") when they hold.
template <class T>
std::optional<json> open(const std::string& value, const std::string& key,
                         const std::optional<std::string>& secret, Decoded<T>& out) {
  json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out = {RecordStatus::kMalformed, std::nullopt,
           fmt::format("not a JSON object: '{}'", value.substr(0, 80))};
    return std::nullopt;
  }
  const auto v = j.find("v");
  if (v == j.end() || *v != kRecordVersion) {
    out = {RecordStatus::kOtherVersion, std::nullopt,
           fmt::format("written in record format {} where this zeus-cpp speaks {}: run the same "
                       "zeus-cpp on every node",
                       v == j.end() ? std::string("(none)") : v->dump(), kRecordVersion)};
    return std::nullopt;
  }
  std::string mac;
  if (const auto m = j.find("mac"); m != j.end()) {
    if (!m->is_string()) {
      out = {RecordStatus::kMalformed, std::nullopt, "its 'mac' is not a string"};
      return std::nullopt;
    }
    mac = m->get<std::string>();
    j.erase("mac");
  }
  if (secret && mac.empty()) {
    out = {RecordStatus::kUnsigned, std::nullopt,
           "not signed: a launcher without the run's token wrote it (give every node the same "
           "--rdzv-conf token_file)"};
    return std::nullopt;
  }
  if (!secret && !mac.empty()) {
    out = {RecordStatus::kSigned, std::nullopt,
           "signed with a token, and this node has none: give it the same --rdzv-conf token_file "
           "(or ZEUS_RDZV_TOKEN_FILE) as the other nodes"};
    return std::nullopt;
  }
  if (!verify_record(secret, key, j.dump(), mac)) {
    out = {RecordStatus::kBadSignature, std::nullopt,
           "its signature does not match: it was signed with another token than this node's, "
           "for another key, or changed since"};
    return std::nullopt;
  }
  return j;
}

Phase parse_phase(const std::string& name) {
  for (Phase p : {Phase::kOpen, Phase::kClosed, Phase::kFinished, Phase::kAborted}) {
    if (phase_name(p) == name) {
      return p;
    }
  }
  throw Missing{fmt::format("'phase' (open, closed, finished or aborted, not '{}')", name)};
}

// Run ids become one key segment: the bytes that could end or escape it are percent-encoded.
std::string key_segment(const std::string& id) {
  std::string out;
  for (const char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '/' || c == '%') {
      out += fmt::format("%{:02X}", u);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Keys::Keys(const std::string& run_id) : prefix("/zeus/rdzv/" + key_segment(run_id) + "/") {}

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // etcd's "every key"
}

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kOpen:
      return "open";
    case Phase::kClosed:
      return "closed";
    case Phase::kFinished:
      return "finished";
    case Phase::kAborted:
      return "aborted";
  }
  return "?";
}

std::string encode_state(const RunState& s, const std::string& key,
                         const std::optional<std::string>& secret) {
  json members = json::array();
  for (const Member& m : s.members) {
    members.push_back({{"id", m.id}, {"host", m.host}, {"nproc", m.nproc}, {"link", m.link_port}});
  }
  return seal(json{{"gen", s.generation},
                   {"step", s.step},
                   {"round", s.round},
                   {"phase", phase_name(s.phase)},
                   {"failures", s.failures},
                   {"reason", s.reason},
                   {"members", members},
                   {"master_addr", s.master_addr},
                   {"master_port", s.master_port},
                   {"done", s.done}},
              key, secret);
}

std::string encode_node(const NodeRecord& n, const std::string& key,
                        const std::optional<std::string>& secret) {
  return seal(json{{"host", n.host},
                   {"nproc", n.nproc},
                   {"link", n.link_port},
                   {"want", n.want},
                   {"lease", std::to_string(n.lease)}},
              key, secret);
}

Decoded<RunState> decode_state(const std::string& value, const std::string& key,
                               const std::optional<std::string>& secret) {
  Decoded<RunState> out;
  const auto body = open(value, key, secret, out);
  if (!body) {
    return out;
  }
  try {
    const json& j = *body;
    RunState s;
    s.generation = text(j, "gen");
    s.step = integer(j, "step", 1, std::numeric_limits<int64_t>::max());
    s.round = small(j, "round");
    s.phase = parse_phase(text(j, "phase"));
    s.failures = small(j, "failures");
    s.reason = text(j, "reason");
    for (const json& m : array(j, "members")) {
      s.members.push_back({text(m, "id"), text(m, "host"), small(m, "nproc", 1), small(m, "link")});
    }
    s.master_addr = text(j, "master_addr");
    s.master_port = small(j, "master_port");
    for (const json& d : array(j, "done")) {
      if (!d.is_string()) {
        throw Missing{"'done' (a list of node ids)"};
      }
      s.done.push_back(d.get<std::string>());
    }
    if (s.generation.empty()) {
      throw Missing{"'gen' (a generation id, not empty)"};
    }
    return {RecordStatus::kValid, std::move(s), ""};
  } catch (const Missing& m) {
    return {RecordStatus::kMalformed, std::nullopt, fmt::format("it lacks {}", m.what)};
  }
}

Decoded<NodeRecord> decode_node(const KeyValue& kv, const std::optional<std::string>& secret) {
  Decoded<NodeRecord> out;
  const auto body = open(kv.value, kv.key, secret, out);
  if (!body) {
    return out;
  }
  try {
    const json& j = *body;
    NodeRecord n;
    n.host = text(j, "host");
    n.nproc = small(j, "nproc", 1);
    n.link_port = small(j, "link");
    n.want = small(j, "want");
    const std::string lease = text(j, "lease");
    try {
      n.lease = std::stoll(lease);
    } catch (const std::exception&) {
      throw Missing{"'lease' (a lease id)"};
    }
    n.mod_revision = kv.mod_revision;
    if (n.host.empty()) {
      throw Missing{"'host' (not empty)"};
    }
    if (n.lease != kv.lease) {
      return {RecordStatus::kWrongLease, std::nullopt,
              fmt::format("it names lease {} and lives by lease {}: a record written again by "
                          "someone else than its node",
                          n.lease, kv.lease)};
    }
    return {RecordStatus::kValid, std::move(n), ""};
  } catch (const Missing& m) {
    return {RecordStatus::kMalformed, std::nullopt, fmt::format("it lacks {}", m.what)};
  }
}

}  // namespace zeus::launch::etcd
