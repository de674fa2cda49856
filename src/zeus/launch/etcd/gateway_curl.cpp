// The etcd gateway's unary calls over libcurl (the watch is in gateway_watch_curl.cpp).
#include <curl/curl.h>
#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "zeus/common/base64.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/http_client/client.h"
#include "zeus/launch/etcd/gateway.h"
#include "zeus/launch/etcd/gateway_impl.h"

namespace zeus::launch::etcd {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// gRPC's status codes in the gateway's error bodies that a member answers while it cannot serve
// (no leader, shutting down): the next member may.
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;
// How long a call rides out an election (etcd's default election timeout is 1 s; a new leader
// is usually there within two).
constexpr std::chrono::milliseconds kElectionAllowance{3'000};

int64_t int_field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) {
    return 0;  // the gateway leaves out fields at their default (0)
  }
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
    }
  } else if (it->is_number_integer()) {
    return it->get<int64_t>();
  }
  throw EtcdRefused(
      fmt::format("etcd answered a '{}' that is not an integer: {}", name, it->dump()));
}

std::string bytes_field(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) {
    return {};
  }
  if (it->is_string()) {
    if (auto bytes = base64_decode(it->get<std::string>())) {
      return *bytes;
    }
  }
  throw EtcdRefused(
      fmt::format("etcd answered a '{}' that is not base64: {}", name, it->dump().substr(0, 80)));
}

std::string b64(const std::string& bytes) {
  return base64_encode(bytes);
}

json op_json(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kPut: {
      json put{{"key", b64(op.key)}, {"value", b64(op.value)}};
      if (op.lease != 0) {
        put["lease"] = std::to_string(op.lease);
      }
      return json{{"request_put", put}};
    }
    case Op::Kind::kDelete: {
      json del{{"key", b64(op.key)}};
      if (!op.range_end.empty()) {
        del["range_end"] = b64(op.range_end);
      }
      return json{{"request_delete_range", del}};
    }
    case Op::Kind::kRange: {
      json range{{"key", b64(op.key)}};
      if (!op.range_end.empty()) {
        range["range_end"] = b64(op.range_end);
      }
      return json{{"request_range", range}};
    }
  }
  return {};
}

}  // namespace

KeyValue parse_kv(const json& j) {
  KeyValue kv;
  kv.key = bytes_field(j, "key");
  kv.value = bytes_field(j, "value");
  kv.create_revision = int_field(j, "create_revision");
  kv.mod_revision = int_field(j, "mod_revision");
  kv.lease = int_field(j, "lease");
  return kv;
}

RangeResult parse_range(const json& j) {
  RangeResult r;
  if (const auto h = j.find("header"); h != j.end()) {
    r.revision = int_field(*h, "revision");
  }
  if (const auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array()) {
    for (const auto& kv : *kvs) {
      r.kvs.push_back(parse_kv(kv));
    }
  }
  return r;
}

void apply_common_options(CURL* curl, const GatewayOptions& o) {
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");  // etcd is reached directly, never via a proxy
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  if (!o.etcd.cacert.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, o.etcd.cacert.c_str());
  }
  if (!o.etcd.cert.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, o.etcd.cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, o.etcd.key.c_str());
  }
}

std::string endpoint_url(const GatewayOptions& o, const std::string& endpoint,
                         const std::string& path) {
  return fmt::format("{}://{}/v3/{}", o.etcd.protocol, endpoint, path);
}

class Gateway::Impl {
 public:
  explicit Impl(GatewayOptions o) : o_(std::move(o)) {
    if (o_.etcd.endpoints.empty()) {
      throw ConfigError("the etcd rendezvous needs at least one endpoint (--rdzv-endpoint)");
    }
    http_ = std::make_unique<http_client::Client>(http_client::ClientOptions{
        .connect_timeout =
            std::chrono::milliseconds(std::min<int64_t>(o_.request_timeout.count(), 1000)),
        .total_timeout = o_.request_timeout,
        .max_body_bytes = kMaxResponseBytes,
        .ca_file = o_.etcd.cacert,
        .cert_file = o_.etcd.cert,
        .key_file = o_.etcd.key});
  }

  // POSTs `body` to /v3/<path>, moving through the endpoints as the header says. A member that
  // answers that it cannot serve now (an election under way: "leader changed", "no leader") is
  // tried again after the others, within kElectionAllowance; an endpoint that does not answer
  // at all counts once.
  json call(const std::string& path, const json& body) {
    std::lock_guard lock(mu_);
    std::string last_error;
    bool reauthenticated = false;
    bool member_answered = false;  // some member answered "not now" in this pass
    const auto give_up = Clock::now() + kElectionAllowance;
    for (size_t tried = 0;;) {
      if (tried >= o_.etcd.endpoints.size()) {
        if (!member_answered || Clock::now() >= give_up) {
          break;
        }
        tried = 0;  // a new pass: the election may be over
        member_answered = false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      const std::string& endpoint = o_.etcd.endpoints[current_];
      if (!o_.etcd.user.empty() && token_.empty() && path != "auth/authenticate") {
        try {
          authenticate_locked(endpoint);
        } catch (const EtcdUnavailable& e) {
          last_error = e.what();
          next_endpoint_locked(tried);
          continue;
        }
      }
      const Attempt a = post_locked(endpoint, path, body.dump());
      if (a.transport_error) {
        last_error = fmt::format("{}: {}", endpoint, *a.transport_error);
        next_endpoint_locked(tried);
        continue;
      }
      last_answer_ = Clock::now();
      answered_ = true;
      if (!a.grpc_code) {
        return a.body;
      }
      if (*a.grpc_code == kGrpcUnauthenticated && !o_.etcd.user.empty() && !reauthenticated) {
        token_.clear();  // an expired token: authenticate again, once
        reauthenticated = true;
        continue;
      }
      if (*a.grpc_code == kGrpcUnavailable || *a.grpc_code == kGrpcDeadlineExceeded) {
        last_error = fmt::format("{}: {}", endpoint, a.message);
        member_answered = true;
        next_endpoint_locked(tried);
        continue;
      }
      throw EtcdRefused(fmt::format("etcd at {} refused /v3/{}: {}{}", endpoint, path, a.message,
                                    advice(a.message)));
    }
    throw EtcdUnavailable(fmt::format("no etcd endpoint answered ({}); last error: {}",
                                      endpoints_text(), last_error));
  }

  std::string endpoints_text() const {
    std::string out;
    for (const auto& e : o_.etcd.endpoints) {
      out += (out.empty() ? "" : ", ") + fmt::format("{}://{}", o_.etcd.protocol, e);
    }
    return out;
  }
  uint64_t epoch() const { return epoch_; }
  Clock::time_point last_answer() const {
    std::lock_guard lock(mu_);
    return last_answer_;
  }
  bool ever_answered() const {
    std::lock_guard lock(mu_);
    return answered_;
  }
  // The endpoint and token a new watch uses.
  std::pair<std::string, std::string> watch_target() const {
    std::lock_guard lock(mu_);
    return {o_.etcd.endpoints[current_], token_};
  }
  const GatewayOptions& options() const { return o_; }

 private:
  struct Attempt {
    std::optional<std::string> transport_error;
    std::optional<int> grpc_code;  // etcd's error, with its message
    std::string message;
    json body;
  };

  Attempt post_locked(const std::string& endpoint, const std::string& path,
                      const std::string& text) {
    Attempt a;
    http_client::Request request;
    request.method = "POST";
    request.url = endpoint_url(o_, endpoint, path);
    request.headers = {"Content-Type: application/json"};
    if (!token_.empty()) {
      request.headers.push_back(fmt::format("Authorization: {}", token_));
    }
    request.body = text;
    http_client::Reply reply;
    try {
      reply = http_->perform(request);
    } catch (const Error& e) {
      a.transport_error = e.what();
      return a;
    }
    const long status = reply.status;
    const std::string& response = reply.body;
    a.body = json::parse(response, nullptr, /*allow_exceptions=*/false);
    if (a.body.is_discarded() || !a.body.is_object()) {
      a.transport_error = fmt::format("HTTP {} with a body that is not etcd's JSON: '{}'", status,
                                      response.substr(0, 120));
      return a;
    }
    if (status != 200 || a.body.contains("error")) {
      // {"error": "...", "message": "...", "code": N}, or a stream's {"error": {"grpc_code": N,
      // "message": "..."}}.
      const auto nested = a.body.find("error");
      const json& e = nested != a.body.end() && nested->is_object() ? *nested : a.body;
      const auto code = e.contains("code") ? e.find("code") : e.find("grpc_code");
      a.grpc_code = code != e.end() && code->is_number_integer() ? code->get<int>() : 2;
      const auto message = e.find("message");
      a.message = message != e.end() && message->is_string() ? message->get<std::string>()
                                                             : fmt::format("HTTP {}", status);
    }
    return a;
  }

  void authenticate_locked(const std::string& endpoint) {
    const json body{{"name", o_.etcd.user}, {"password", o_.etcd.password.value_or("")}};
    const Attempt a = post_locked(endpoint, "auth/authenticate", body.dump());
    if (a.transport_error) {
      throw EtcdUnavailable(fmt::format("{}: {}", endpoint, *a.transport_error));
    }
    if (a.grpc_code) {
      throw EtcdRefused(
          fmt::format("etcd at {} refused user '{}': {}; check --rdzv-conf user and password_file",
                      endpoint, o_.etcd.user, a.message));
    }
    const auto token = a.body.find("token");
    token_ = token != a.body.end() && token->is_string() ? token->get<std::string>() : "";
  }

  void next_endpoint_locked(size_t& tried) {
    ++tried;
    current_ = (current_ + 1) % o_.etcd.endpoints.size();
    ++epoch_;
  }

  static std::string advice(const std::string& message) {
    if (message.find("permission denied") != std::string::npos) {
      return "; give the rendezvous an etcd user that may read and write its keys "
             "(--rdzv-conf user=NAME,password_file=PATH)";
    }
    if (message.find("user name is empty") != std::string::npos ||
        message.find("invalid auth token") != std::string::npos) {
      return "; this etcd has authentication on: --rdzv-conf user=NAME,password_file=PATH";
    }
    return "";
  }

  GatewayOptions o_;
  std::unique_ptr<http_client::Client> http_;
  mutable std::mutex mu_;
  size_t current_ = 0;
  std::atomic<uint64_t> epoch_{0};
  std::string token_;  // etcd's auth token, when a user is given
  Clock::time_point last_answer_{};
  bool answered_ = false;
};

Gateway::Gateway(GatewayOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Gateway::~Gateway() = default;

RangeResult Gateway::range(const std::string& key, const std::string& range_end) {
  json body{{"key", b64(key)}};
  if (!range_end.empty()) {
    body["range_end"] = b64(range_end);
  }
  return parse_range(impl_->call("kv/range", body));
}

TxnResult Gateway::txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                       const std::vector<Op>& failure) {
  json body{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const Compare& c : compares) {
    json cmp{{"key", b64(c.key)}, {"result", "EQUAL"}};
    if (!c.range_end.empty()) {
      cmp["range_end"] = b64(c.range_end);
    }
    if (c.target == Compare::Target::kMod) {
      cmp["target"] = "MOD";
      cmp["mod_revision"] = std::to_string(c.revision);
    } else {
      cmp["target"] = "CREATE";
      cmp["create_revision"] = std::to_string(c.revision);
    }
    body["compare"].push_back(cmp);
  }
  for (const Op& op : success) {
    body["success"].push_back(op_json(op));
  }
  for (const Op& op : failure) {
    body["failure"].push_back(op_json(op));
  }
  const json answer = impl_->call("kv/txn", body);
  TxnResult r;
  const auto succeeded = answer.find("succeeded");
  r.succeeded = succeeded != answer.end() && succeeded->is_boolean() && succeeded->get<bool>();
  if (const auto h = answer.find("header"); h != answer.end()) {
    r.revision = int_field(*h, "revision");
  }
  if (const auto responses = answer.find("responses");
      responses != answer.end() && responses->is_array()) {
    for (const auto& response : *responses) {
      if (const auto range = response.find("response_range"); range != response.end()) {
        r.ranges.push_back(parse_range(*range));
      }
    }
  }
  return r;
}

Gateway::Lease Gateway::grant(std::chrono::seconds ttl) {
  const json answer = impl_->call("lease/grant", json{{"TTL", std::to_string(ttl.count())}});
  Lease lease{int_field(answer, "ID"), std::chrono::seconds(int_field(answer, "TTL"))};
  if (lease.id == 0) {
    throw EtcdRefused(fmt::format("etcd granted no lease: {}", answer.dump().substr(0, 200)));
  }
  return lease;
}

std::optional<std::chrono::seconds> Gateway::keep_alive(int64_t lease) {
  // The gateway streams the answers of this bidirectional call; one request, one answer.
  const json answer = impl_->call("lease/keepalive", json{{"ID", std::to_string(lease)}});
  const auto result_it = answer.find("result");
  const json& result = result_it != answer.end() && result_it->is_object() ? *result_it : answer;
  const int64_t ttl = int_field(result, "TTL");
  return ttl > 0 ? std::optional(std::chrono::seconds(ttl)) : std::nullopt;
}

std::optional<std::chrono::seconds> Gateway::time_to_live(int64_t lease) {
  const json answer = impl_->call("lease/timetolive", json{{"ID", std::to_string(lease)}});
  const int64_t ttl = int_field(answer, "TTL");
  return ttl > 0 ? std::optional(std::chrono::seconds(ttl)) : std::nullopt;
}

void Gateway::revoke(int64_t lease) {
  try {
    impl_->call("lease/revoke", json{{"ID", std::to_string(lease)}});
  } catch (const EtcdRefused& e) {
    if (std::string_view(e.what()).find("lease not found") == std::string_view::npos) {
      throw;
    }
  }
}

std::string Gateway::endpoints_text() const {
  return impl_->endpoints_text();
}
uint64_t Gateway::endpoint_epoch() const {
  return impl_->epoch();
}
std::chrono::steady_clock::time_point Gateway::last_answer() const {
  return impl_->last_answer();
}
bool Gateway::ever_answered() const {
  return impl_->ever_answered();
}

std::unique_ptr<Gateway::Watch> Gateway::watch(const std::string& key, const std::string& range_end,
                                               int64_t start_revision, OnEvents on_events,
                                               std::function<void()> on_end) {
  const auto [endpoint, token] = impl_->watch_target();
  json create{{"key", b64(key)}, {"start_revision", std::to_string(start_revision)}};
  if (!range_end.empty()) {
    create["range_end"] = b64(range_end);
  }
  return start_watch(impl_->options(), endpoint, token, json{{"create_request", create}}.dump(),
                     std::move(on_events), std::move(on_end));
}

}  // namespace zeus::launch::etcd
