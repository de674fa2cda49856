#include "zeus/launch/c10d/protocol.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/overloaded.h"

namespace zeus::launch::c10d {
namespace {

using json = nlohmann::json;

std::string quote(std::string_view line) {
  return line.size() > 120 ? fmt::format("'{}...'", line.substr(0, 120))
                           : fmt::format("'{}'", line);
}

// The fields of one decoded object, each read once and checked.
class Fields {
 public:
  Fields(const json& j, std::string_view op, std::string_view line) : j_(j), op_(op), line_(line) {}
  int integer(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end() || !it->is_number_integer() || *it < std::numeric_limits<int>::min() ||
        *it > std::numeric_limits<int>::max()) {
      throw problem(name, "an integer of 32 bits");
    }
    return it->get<int>();
  }
  bool boolean(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end() || !it->is_boolean()) {
      throw problem(name, "true or false");
    }
    return it->get<bool>();
  }
  std::string text(const char* name) const {
    const auto it = j_.find(name);
    if (it == j_.end() || !it->is_string()) {
      throw problem(name, "a string");
    }
    return it->get<std::string>();
  }

 private:
  DistError problem(const char* name, const char* kind) const {
    return DistError(fmt::format("rendezvous message '{}' needs field '{}' ({}): {}", op_, name,
                                 kind, quote(line_)));
  }
  const json& j_;
  std::string_view op_;
  std::string_view line_;
};

}  // namespace

std::string_view op_name(const Message& message) {
  return std::visit(
      Overloaded{[](const Hello&) { return "hello"; }, [](const Welcome&) { return "welcome"; },
                 [](const Refused&) { return "refused"; }, [](const Join&) { return "join"; },
                 [](const Waiting&) { return "waiting"; },
                 [](const PortRequest&) { return "port_request"; },
                 [](const PortReply&) { return "port_reply"; },
                 [](const Round&) { return "round"; }, [](const Heartbeat&) { return "heartbeat"; },
                 [](const Failed&) { return "failed"; }, [](const Done&) { return "done"; },
                 [](const Restart&) { return "restart"; }, [](const Abort&) { return "abort"; }},
      message);
}

std::string encode(const Message& message, const std::optional<Seal>& seal) {
  json j = std::visit(
      Overloaded{[](const Hello& m) {
                   return json{{"run_id", m.run_id}, {"nonce", m.nonce}, {"auth", m.auth}};
                 },
                 [](const Welcome& m) {
                   return json{{"run_id", m.run_id}, {"nonce", m.nonce}, {"auth", m.auth}};
                 },
                 [](const Refused& m) {
                   return json{{"reason", m.reason}};
                 },
                 [](const Join& m) {
                   return json{{"host", m.host}, {"nproc", m.nproc}};
                 },
                 [](const Waiting& m) {
                   return json{{"joined", m.joined}, {"min", m.min_nodes}, {"max", m.max_nodes}};
                 },
                 [](const PortRequest& m) {
                   return json{{"round", m.round}};
                 },
                 [](const PortReply& m) {
                   return json{{"round", m.round}, {"port", m.port}};
                 },
                 [](const Round& m) {
                   return json{{"round", m.round},
                               {"node_rank", m.node_rank},
                               {"nnodes", m.nnodes},
                               {"world_size", m.world_size},
                               {"first_rank", m.first_rank},
                               {"master_addr", m.master_addr},
                               {"master_port", m.master_port}};
                 },
                 [](const Heartbeat&) { return json::object(); },
                 [](const Failed& m) {
                   return json{{"reason", m.reason}};
                 },
                 [](const Done&) { return json::object(); },
                 [](const Restart& m) {
                   return json{{"reason", m.reason}};
                 },
                 [](const Abort& m) {
                   return json{{"reason", m.reason}};
                 }},
      message);
  j["v"] = kVersion;
  j["op"] = op_name(message);
  if (seal) {
    j["seq"] = seal->seq;
    j["mac"] = seal->mac;
  }
  return j.dump();
}

namespace {
Message decode_message(const json& j, std::string_view line);
}  // namespace

Decoded decode_sealed(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    throw DistError(fmt::format("not a rendezvous message (not a JSON object): {}", quote(line)));
  }
  const auto v = j.find("v");
  if (v == j.end() || !v->is_number_integer() || *v != kVersion) {
    const std::string theirs = v == j.end() ? std::string("(none)") : v->dump();
    throw VersionMismatch(
        fmt::format("rendezvous protocol version {} where {} is spoken: {}; run the same "
                    "zeus-cpp on every node",
                    theirs, kVersion, quote(line)),
        theirs);
  }
  const auto op_it = j.find("op");
  if (op_it == j.end() || !op_it->is_string()) {
    throw DistError(fmt::format("rendezvous message without an 'op': {}", quote(line)));
  }
  Decoded out{decode_message(j, line), std::nullopt};
  const auto seq = j.find("seq");
  const auto mac = j.find("mac");
  if (seq != j.end() || mac != j.end()) {
    if (seq == j.end() || mac == j.end() || !seq->is_number_integer() || !mac->is_string() ||
        *seq < 1 || *seq > std::numeric_limits<int64_t>::max()) {
      throw DistError(fmt::format(
          "rendezvous message '{}' has a malformed signature ('seq' an integer, 'mac' a "
          "string): {}",
          op_it->get<std::string>(), quote(line)));
    }
    out.seal = Seal{seq->get<int64_t>(), mac->get<std::string>()};
  }
  return out;
}

Message decode(std::string_view line) {
  return decode_sealed(line).message;
}

namespace {

Message decode_message(const json& j, std::string_view line) {
  const std::string op = j.at("op").get<std::string>();
  const Fields f(j, op, line);
  if (op == "hello")
    return Hello{f.text("run_id"), f.text("nonce"), f.boolean("auth")};
  if (op == "welcome")
    return Welcome{f.text("run_id"), f.text("nonce"), f.boolean("auth")};
  if (op == "refused")
    return Refused{f.text("reason")};
  if (op == "join")
    return Join{f.text("host"), f.integer("nproc")};
  if (op == "waiting")
    return Waiting{f.integer("joined"), f.integer("min"), f.integer("max")};
  if (op == "port_request")
    return PortRequest{f.integer("round")};
  if (op == "port_reply")
    return PortReply{f.integer("round"), f.integer("port")};
  if (op == "round") {
    return Round{f.integer("round"),      f.integer("node_rank"),  f.integer("nnodes"),
                 f.integer("world_size"), f.integer("first_rank"), f.text("master_addr"),
                 f.integer("master_port")};
  }
  if (op == "heartbeat")
    return Heartbeat{};
  if (op == "failed")
    return Failed{f.text("reason")};
  if (op == "done")
    return Done{};
  if (op == "restart")
    return Restart{f.text("reason")};
  if (op == "abort")
    return Abort{f.text("reason")};
  throw DistError(fmt::format("unknown rendezvous message '{}': {}", op, quote(line)));
}

}  // namespace

}  // namespace zeus::launch::c10d
