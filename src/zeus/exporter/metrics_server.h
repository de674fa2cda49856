// GET /metrics over TCP for Prometheus: zeusd's --metrics-bind-address and
// `zeus monitor --serve`. Read-only: it renders the sampler's latest readings and changes
// nothing; with a token, a scrape without `Authorization: Bearer <token>` is refused (401).
// Who can reach it and what it tells them: docs/metrics.md.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "zeus/common/secret_file.h"
#include "zeus/http/server.h"
#include "zeus/metrics/node_sampler.h"

namespace zeus::exporter {

struct MetricsServerOptions {
  // "host:port"; loopback unless the operator names another address.
  std::string bind_address = "127.0.0.1:9400";
  // A file holding the bearer token (first line, surrounding whitespace dropped); empty: none.
  // Read again when it changes (a rotated Secret needs no restart).
  std::filesystem::path token_file;
  // Bounds: a scrape is a small GET, so small limits.
  unsigned max_connections = 64;
  std::chrono::seconds idle_timeout{30};
};

// The route alone (tests drive it without a socket): GET or HEAD /metrics answers the text
// format; / answers a short page naming /metrics; anything else 404 or 405.
http::Response handle_metrics_request(const metrics::NodeSampler& sampler,
                                      const std::optional<std::string>& token,
                                      const http::Request& request);

class MetricsServer {
 public:
  // Throws what http::Server throws (address in use, bad address), naming the address.
  MetricsServer(const metrics::NodeSampler& sampler, MetricsServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  const std::string& address() const;

 private:
  std::unique_ptr<WatchedSecretFile> token_;
  std::unique_ptr<http::Server> server_;
};

}  // namespace zeus::exporter
