// The one HTTP client of zeus-cpp (zeusd's client, the batch-size service's, the Pushgateway's,
// etcd's gateway), over libcurl: every reply bounded (body and headers), connect and total
// timeouts, a Unix socket or TCP, TLS where the caller gives certificates, never a proxy unless
// asked. A peer that answers more than the bound is an error naming it, not an allocation of
// whatever it sends. Beside the server (http/) but its own module: zeus_core's modules use the
// client and must not see the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::http_client {

struct ClientOptions {
  // Set: every request goes over this Unix socket (the URL's host is then only a name).
  std::string unix_socket;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds total_timeout{30'000};  // 0: none (a long poll the caller aborts)
  // Bounds on what a reply may hold: its body, and its header block.
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 64 * 1024;
  // TLS (https:// URLs): the CA bundle to trust, and a client certificate and key.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool use_proxy = false;  // the environment's proxy; off: services are reached directly
  bool tcp_nodelay = true;
};

struct Request {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when not empty, or for POST/PUT
  // Called while the request runs; true aborts it (an IoError saying it was aborted).
  std::function<bool()> abort;
};

struct Reply {
  long status = 0;
  std::string body;
};

// Contract: thread-safe (one request at a time per client; the connection is reused between
// them). Throws IoError naming the URL (or socket) and what happened when the peer cannot be
// reached, times out, or sends more than the bounds (the reply is then discarded); a status of
// the peer's (404, 500) is no error here: the caller reads it.
class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Reply perform(const Request& request);
  const ClientOptions& options() const { return options_; }

 private:
  ClientOptions options_;
  std::mutex mu_;
  void* curl_ = nullptr;  // CURL*
};

// Whether this build has the client (libcurl); without it perform() throws NotSupported.
bool available();

// `text` for a URL's path or query: every byte but RFC 3986's unreserved ones as %XX.
std::string percent_encode(std::string_view text);

}  // namespace zeus::http_client
