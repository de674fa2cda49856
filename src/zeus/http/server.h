// The one HTTP/1.1 server of zeus-cpp's services (zeusd now; the batch-size service and the
// metrics endpoint after it): a thin shell over GNU libmicrohttpd, on a Unix socket or a TCP
// address, with every bound a server facing other users needs. Parsing is the library's; this
// module turns a request into a plain value, hands it to a handler, and writes what it returns.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zeus/common/posix.h"

namespace zeus::http {

// Who is on the other end of a Unix-socket connection (SO_PEERCRED: the process that
// connected). Absent on TCP.
struct PeerCredentials {
  // 0 when the peer's process is in a PID namespace this server cannot see (a container's,
  // where the server runs in a sibling namespace: Kubernetes without hostPID).
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Where `pid` is 0 and the kernel gives one (SO_PEERPIDFD, Linux 6.5+): a pidfd of the peer
  // process, readable once it has ended, the same for every request of the connection. Null
  // otherwise.
  std::shared_ptr<const UniqueFd> pidfd;
  // Which connection (unique for the server's life), for telling pidfds apart where the kernel
  // gives every pidfd one inode.
  uint64_t connection_id = 0;
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  // Decoded query parameters in arrival order; a key given without '=' has an empty value and
  // is flagged in `valueless` (so "?block" and "?block=" can be told apart if a route cares).
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::string> valueless;
  // Header names lower-cased; a repeated header keeps its last value.
  std::map<std::string, std::string> headers;
  std::optional<PeerCredentials> peer;
  size_t body_bytes = 0;
  std::string body;  // the whole body (at most ServerOptions::max_body_bytes)

  // The header's value, or std::nullopt.
  std::optional<std::string> header(const std::string& lower_name) const;
};

// A body sent as it is made (server-sent events). next() is called from the connection's own
// thread: it blocks up to `wait` and returns the next bytes to send, "" when nothing came in
// that time (the server then checks that the client is still there and calls again), or
// std::nullopt when the stream is over. Destroyed when the connection closes.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::optional<std::string> next(std::chrono::milliseconds wait) = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::unique_ptr<Stream> stream;  // when set, the body is the stream (no Content-Length)

  static Response json(int status, std::string body);
  static Response text(int status, std::string body);
};

// Called once per complete request, from the connection's thread (so possibly from many threads
// at once). It must not throw; anything it throws becomes a 500 naming the error.
using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  enum class Mode { kUnixSocket, kTcp };
  Mode mode = Mode::kUnixSocket;
  // Unix socket: its path (the parent is created), mode bits and owner set after bind.
  std::string socket_path;
  mode_t socket_permissions = 0666;
  std::optional<uid_t> socket_uid;
  std::optional<gid_t> socket_gid;
  // TCP: "host:port" (an IPv4 address or "localhost"; port 0 picks a free one).
  std::string tcp_address = "127.0.0.1:4938";

  // Bounds. A body longer than max_body_bytes is answered 413 before the handler sees the
  // request; more header fields than max_header_count, 431; the whole request head (line and
  // headers) must fit in memory_limit_bytes (the library answers 431 otherwise).
  size_t max_body_bytes = 64 * 1024;
  size_t max_header_count = 64;
  size_t memory_limit_bytes = 32 * 1024;
  // Connections at once (further ones are closed at accept), and how long a connection may
  // stay silent (streams are exempt: they are silent between changes, so they have caps of
  // their own).
  unsigned max_connections = 256;
  std::chrono::seconds idle_timeout{30};
  unsigned max_streams = 128;
  // Per peer (the uid on a Unix socket, the address on TCP: Note [peer policy] in
  // docs/security.md): a connection over the cap is closed as soon as it is accepted, a stream
  // over it answered 429. 0: a quarter of the total (at least 1).
  unsigned max_connections_per_peer = 0;
  unsigned max_streams_per_peer = 0;
};

// Serves until destroyed. Throws ConfigError for a bad address or a socket path in use by a
// live server (another one answers there), IoError for other bind failures, naming the address.
class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Where it listens: the socket path, or "127.0.0.1:<port>" with the port actually bound.
  const std::string& address() const;
  int tcp_port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The reason phrase of an HTTP status ("Not Found").
std::string status_text(int status);

}  // namespace zeus::http
