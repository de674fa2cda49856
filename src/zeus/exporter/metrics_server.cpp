#include "zeus/exporter/metrics_server.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/mac.h"
#include "zeus/common/secret_file.h"

namespace zeus::exporter {

namespace {

bool loopback(const std::string& address) {
  return address.starts_with("127.") || address.starts_with("localhost:");
}

}  // namespace

http::Response handle_metrics_request(const metrics::NodeSampler& sampler,
                                      const std::optional<std::string>& token,
                                      const http::Request& request) {
  if (request.path != "/metrics" && request.path != "/") {
    return http::Response::text(404, "not found: the metrics are at /metrics\n");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    http::Response r = http::Response::text(405, "only GET and HEAD are served here\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (token) {
    const std::string auth = request.header("authorization").value_or("");
    constexpr std::string_view kBearer = "Bearer ";
    if (!auth.starts_with(kBearer) ||
        !constant_time_equal(std::string_view(auth).substr(kBearer.size()), *token)) {
      http::Response r =
          http::Response::text(401, "a bearer token is required (Authorization: Bearer ...)\n");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
  }
  if (request.path == "/") {
    http::Response r = http::Response::text(
        200, "zeus-cpp node metrics: scrape /metrics (Prometheus text format 0.0.4)\n");
    return r;
  }
  http::Response r;
  r.status = 200;
  r.content_type = std::string(metrics::kTextContentType);
  r.body = sampler.scrape();
  return r;
}

MetricsServer::MetricsServer(const metrics::NodeSampler& sampler, MetricsServerOptions options) {
  if (!options.token_file.empty()) {
    token_ = std::make_unique<WatchedSecretFile>(options.token_file, "metrics token file");
  }
  http::ServerOptions s;
  s.mode = http::ServerOptions::Mode::kTcp;
  s.tcp_address = options.bind_address;
  s.max_body_bytes = 0;
  s.max_header_count = 32;
  s.max_connections = options.max_connections;
  s.idle_timeout = options.idle_timeout;
  server_ = std::make_unique<http::Server>(s, [&sampler, this](const http::Request& r) {
    return handle_metrics_request(sampler, token_ ? std::optional(token_->current()) : std::nullopt,
                                  r);
  });
  if (!loopback(server_->address()) && !token_) {
    logger().warn(
        "metrics: serving {} without a token: anyone who can reach it reads this node's GPU "
        "power, limits and which processes hold them; give a token file, or bind 127.0.0.1",
        server_->address());
  }
  logger().info("metrics: serving http://{}/metrics", server_->address());
}

MetricsServer::~MetricsServer() = default;

const std::string& MetricsServer::address() const {
  return server_->address();
}

}  // namespace zeus::exporter
