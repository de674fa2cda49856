#include "metrics_support.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

namespace zeus::test {

namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";

std::string url_encode(const std::string& text) {
  CURL* curl = curl_easy_init();
  char* out = curl_easy_escape(curl, text.c_str(), static_cast<int>(text.size()));
  std::string encoded = out;
  curl_free(out);
  curl_easy_cleanup(curl);
  return encoded;
}

// Starts argv(port) on a free loopback port and waits until its GET /-/ready answers 200 (30 s);
// a port taken between free_port() and the bind is retried with another, three times. The
// child, with *port set, or nullptr.
std::unique_ptr<Child> start_ready(const std::function<std::vector<std::string>(int)>& argv,
                                   int* port) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    *port = free_port();
    auto child = std::make_unique<Child>(argv(*port));
    const std::string ready = fmt::format("http://127.0.0.1:{}/-/ready", *port);
    if (eventually([&] { return http_call("GET", ready).status == 200; },
                   std::chrono::seconds(30))) {
      return child;
    }
    child->kill(SIGKILL);
    child->wait();
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<PrometheusServer> PrometheusServer::start(
    const std::vector<std::string>& targets, std::string& why_not, const std::string& bearer_token,
    const std::vector<std::string>& pushgateways) {
  if (::access(kPrometheus, X_OK) != 0) {
    why_not = fmt::format(
        "{} is not installed (Debian's prometheus package; "
        "scripts/install-deps.sh installs it)",
        kPrometheus);
    return nullptr;
  }
  std::unique_ptr<PrometheusServer> p(new PrometheusServer());
  p->dir_ = std::make_unique<TempDir>();
  const auto config = p->dir_->path() / "prometheus.yml";
  {
    std::ofstream out(config);
    out << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n  - job_name: zeus\n    scrape_timeout: 900ms\n";
    if (!bearer_token.empty()) {
      const auto token_file = p->dir_->path() / "token";
      std::ofstream(token_file) << bearer_token << "\n";
      out << "    authorization:\n      credentials_file: " << token_file.string() << "\n";
    }
    const auto list = [&out](const std::vector<std::string>& hosts) {
      out << "    static_configs:\n      - targets: [";
      for (size_t i = 0; i < hosts.size(); ++i) {
        out << (i == 0 ? "" : ", ") << "'" << hosts[i] << "'";
      }
      out << "]\n";
    };
    list(targets);
    if (!pushgateways.empty()) {
      out << "  - job_name: pushgateway\n    honor_labels: true\n    scrape_timeout: 900ms\n";
      list(pushgateways);
    }
  }
  p->prometheus_ = start_ready(
      [&](int port) {
        return std::vector<std::string>{
            kPrometheus, "--config.file=" + config.string(),
            "--storage.tsdb.path=" + (p->dir_->path() / "data").string(),
            fmt::format("--web.listen-address=127.0.0.1:{}", port), "--log.level=warn"};
      },
      &p->port_);
  if (!p->prometheus_) {
    why_not = "prometheus did not become ready on a loopback port in 30 s (three tries)";
    return nullptr;
  }
  return p;
}

PrometheusServer::~PrometheusServer() {
  if (prometheus_) {
    prometheus_->kill(SIGTERM);
    prometheus_->wait();
  }
}

std::string PrometheusServer::url() const {
  return fmt::format("http://127.0.0.1:{}", port_);
}

nlohmann::json PrometheusServer::query(const std::string& expr) const {
  const HttpReply r = http_call("GET", url() + "/api/v1/query?query=" + url_encode(expr));
  const auto j = nlohmann::json::parse(r.body.empty() ? "{}" : r.body, nullptr, false);
  if (r.status != 200 || j.is_discarded() || j.value("status", "") != "success") {
    throw std::runtime_error(fmt::format("query '{}': HTTP {}: {}", expr, r.status, r.body));
  }
  return j["data"]["result"];
}

nlohmann::json PrometheusServer::query_until_series(const std::string& expr,
                                                    std::chrono::seconds timeout) const {
  nlohmann::json result = nlohmann::json::array();
  eventually(
      [&] {
        result = query(expr);
        return !result.empty();
      },
      timeout);
  return result;
}

std::unique_ptr<PushgatewayServer> PushgatewayServer::start(std::string& why_not) {
  constexpr const char* kGateway = "/usr/bin/prometheus-pushgateway";
  if (::access(kGateway, X_OK) != 0) {
    why_not = fmt::format(
        "{} is not installed (Debian's prometheus-pushgateway package; "
        "scripts/install-deps.sh installs it)",
        kGateway);
    return nullptr;
  }
  std::unique_ptr<PushgatewayServer> g(new PushgatewayServer());
  g->gateway_ = start_ready(
      [&](int port) {
        return std::vector<std::string>{
            kGateway, fmt::format("--web.listen-address=127.0.0.1:{}", port),
            // In memory: Debian's build persists to /var/lib/prometheus unless told otherwise.
            "--persistence.file=", "--log.level=warn"};
      },
      &g->port_);
  if (!g->gateway_) {
    why_not = "prometheus-pushgateway did not become ready on a loopback port (three tries)";
    return nullptr;
  }
  return g;
}

PushgatewayServer::~PushgatewayServer() {
  if (gateway_) {
    gateway_->kill(SIGTERM);
    gateway_->wait();
  }
}

std::string PushgatewayServer::url() const {
  return fmt::format("http://127.0.0.1:{}", port_);
}

std::string PushgatewayServer::metrics() const {
  return http_call("GET", url() + "/metrics").body;
}

std::optional<double> exposition_value(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      return std::stod(text.substr(at + series.size() + 1));
    }
    at += series.size();
  }
  return std::nullopt;
}

std::optional<double> series_value(const nlohmann::json& result,
                                   const std::map<std::string, std::string>& labels) {
  for (const auto& series : result) {
    bool match = true;
    for (const auto& [k, v] : labels) {
      match = match && series["metric"].value(k, "") == v;
    }
    if (match) {
      return std::stod(series["value"][1].get<std::string>());
    }
  }
  return std::nullopt;
}

std::string scrape(const std::string& address, const std::vector<std::string>& headers) {
  const HttpReply r = http_call("GET", "http://" + address + "/metrics", "", headers);
  return r.status == 200 ? r.body : "HTTP " + std::to_string(r.status);
}

}  // namespace zeus::test
