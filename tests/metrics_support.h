// The metrics tests' real servers: Prometheus 2.42 from Debian, started on a free loopback port
// with a scrape config of the test's targets (scraped every second), stopped and removed when
// done.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/test_support.h"

namespace zeus::test {

class PrometheusServer {
 public:
  // Scrapes each "host:port" of `targets` (job "zeus") every second, with `bearer_token` when
  // not empty, and each of `pushgateways` (job "pushgateway", honor_labels: the pushed job
  // label stays). nullptr with `why_not` saying why it cannot start here (not installed).
  static std::unique_ptr<PrometheusServer> start(const std::vector<std::string>& targets,
                                                 std::string& why_not,
                                                 const std::string& bearer_token = "",
                                                 const std::vector<std::string>& pushgateways = {});
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // GET /api/v1/query?query=<expr>: the `data.result` array (throws on an error answer, with
  // Prometheus's error text).
  nlohmann::json query(const std::string& expr) const;
  // Polls query(expr) until it returns at least one series, up to `timeout`.
  nlohmann::json query_until_series(const std::string& expr, std::chrono::seconds timeout) const;
  std::string url() const;

 private:
  PrometheusServer() = default;
  std::unique_ptr<TempDir> dir_;
  int port_ = 0;
  std::unique_ptr<Child> prometheus_;
};

// `prometheus-pushgateway` (1.5, Debian's) on a free loopback port, in memory (no persistence
// file), killed when done.
class PushgatewayServer {
 public:
  static std::unique_ptr<PushgatewayServer> start(std::string& why_not);
  ~PushgatewayServer();
  PushgatewayServer(const PushgatewayServer&) = delete;
  PushgatewayServer& operator=(const PushgatewayServer&) = delete;

  std::string url() const;
  // GET /metrics: everything pushed, in the text format.
  std::string metrics() const;

 private:
  PushgatewayServer() = default;
  int port_ = 0;
  std::unique_ptr<Child> gateway_;
};

// The value on the line of `text` (Prometheus's text format) that is exactly `series` (the name
// and its labels as written) followed by a space, or std::nullopt.
std::optional<double> exposition_value(const std::string& text, const std::string& series);

// GET /metrics at `address` (host:port): the body, or "HTTP <status>" when the status is not 200.
std::string scrape(const std::string& address, const std::vector<std::string>& headers = {});

// The value of the series of `result` (a query's data.result) whose labels include `labels`.
std::optional<double> series_value(const nlohmann::json& result,
                                   const std::map<std::string, std::string>& labels);

}  // namespace zeus::test
