#include "zeus/http/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <functional>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/http/peer_limits.h"

namespace zeus::http {

std::optional<std::string> Request::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  if (it == headers.end()) {
    return std::nullopt;
  }
  return it->second;
}

Response Response::json(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::text(int status, std::string body) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

std::string status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    default:
      return "Status " + std::to_string(status);
  }
}

namespace {

// What one request carries between the library's calls of the access handler.
struct RequestState {
  std::string body;  // up to max_body_bytes
  size_t body_bytes = 0;
  bool body_too_large = false;
};

// A stream's bytes not yet taken by the library, and how to tell that the client left.
struct StreamState {
  std::unique_ptr<Stream> stream;
  std::string pending;
  size_t offset = 0;
  int fd = -1;
  const std::atomic<bool>* stopping = nullptr;
  // The stream slots it holds, given back when the library frees it.
  std::function<void()> on_free;
};

bool peer_hung_up(int fd) {
  if (fd < 0) {
    return false;
  }
  pollfd pfd{fd, POLLRDHUP, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

ssize_t read_stream(void* cls, uint64_t /*pos*/, char* buf, size_t max) {
  auto* s = static_cast<StreamState*>(cls);
  try {
    while (s->offset >= s->pending.size()) {
      if (s->stopping->load() || peer_hung_up(s->fd)) {
        return MHD_CONTENT_READER_END_WITH_ERROR;
      }
      std::optional<std::string> chunk = s->stream->next(std::chrono::milliseconds(500));
      if (!chunk) {
        return MHD_CONTENT_READER_END_OF_STREAM;
      }
      s->pending = std::move(*chunk);
      s->offset = 0;
    }
    const size_t n = std::min(max, s->pending.size() - s->offset);
    std::memcpy(buf, s->pending.data() + s->offset, n);
    s->offset += n;
    return static_cast<ssize_t>(n);
  } catch (const std::exception& e) {
    logger().warn("http: a stream failed: {}", e.what());
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
}

void free_stream(void* cls) {
  auto* state = static_cast<StreamState*>(cls);
  if (state->on_free) {
    state->on_free();
  }
  delete state;
}

MHD_Result queue(MHD_Connection* connection, Response response, const std::atomic<bool>& stopping,
                 std::function<void()> on_stream_free = {}) {
  MHD_Response* r = nullptr;
  const bool streaming = response.stream != nullptr;
  if (streaming) {
    auto* state = new StreamState;
    state->stream = std::move(response.stream);
    state->stopping = &stopping;
    state->on_free = std::move(on_stream_free);
    if (const auto* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD)) {
      state->fd = info->connect_fd;
    }
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, state, free_stream);
    if (r == nullptr) {
      free_stream(state);
      return MHD_NO;
    }
    // A stream is silent until something changes: the idle timeout is not for it.
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, 0U);
  } else {
    r = MHD_create_response_from_buffer(response.body.size(), response.body.data(),
                                        MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) {
      return MHD_NO;
    }
  }
  if (!response.content_type.empty() && (streaming || !response.body.empty())) {
    MHD_add_response_header(r, "Content-Type", response.content_type.c_str());
  }
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(r, name.c_str(), value.c_str());
  }
  const MHD_Result rc = MHD_queue_response(connection, static_cast<unsigned>(response.status), r);
  MHD_destroy_response(r);
  return rc;
}

UniqueFd unix_listener(const ServerOptions& o) {
  if (o.socket_path.empty()) {
    throw ConfigError("--socket-path is empty: give the Unix socket's path");
  }
  sockaddr_un addr{};
  if (o.socket_path.size() >= sizeof(addr.sun_path)) {
    throw ConfigError(fmt::format("socket path '{}' is longer than {} bytes; choose a shorter one",
                                  o.socket_path, sizeof(addr.sun_path) - 1));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, o.socket_path.c_str(), o.socket_path.size() + 1);
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr);

  // As upstream: an existing path is removed only when nothing answers there (a stale socket of
  // a server that died); a live server's socket is never taken over.
  struct stat st {};
  if (::lstat(o.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      throw ConfigError(
          fmt::format("'{}' exists and is not a socket; remove it or choose another --socket-path",
                      o.socket_path));
    }
    UniqueFd probe(
        check_posix(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket", o.socket_path));
    if (::connect(probe.get(), sa, sizeof(addr)) == 0) {
      throw ConfigError(
          fmt::format("another server answers on '{}'; stop it or choose another --socket-path",
                      o.socket_path));
    }
    if (errno != ECONNREFUSED) {
      throw_posix_error("connect (probing the existing socket)", o.socket_path, errno);
    }
    check_posix(::unlink(o.socket_path.c_str()), "unlink (stale socket)", o.socket_path);
  }
  const std::filesystem::path parent = std::filesystem::path(o.socket_path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent);
  }
  UniqueFd fd(
      check_posix(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket", o.socket_path));
  check_posix(::bind(fd.get(), sa, sizeof(addr)), "bind", o.socket_path);
  check_posix(::chmod(o.socket_path.c_str(), o.socket_permissions), "chmod", o.socket_path);
  if (o.socket_uid || o.socket_gid) {
    check_posix(
        ::chown(o.socket_path.c_str(), o.socket_uid ? *o.socket_uid : static_cast<uid_t>(-1),
                o.socket_gid ? *o.socket_gid : static_cast<gid_t>(-1)),
        "chown", o.socket_path);
  }
  check_posix(::listen(fd.get(), 128), "listen", o.socket_path);
  return fd;
}

UniqueFd tcp_listener(const ServerOptions& o, int* port_out) {
  const auto colon = o.tcp_address.rfind(':');
  const auto port = colon == std::string::npos
                        ? std::nullopt
                        : parse_number<int>(std::string_view(o.tcp_address).substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    throw ConfigError(
        fmt::format("TCP address '{}' is not host:port (e.g. 127.0.0.1:4938)", o.tcp_address));
  }
  std::string host = o.tcp_address.substr(0, colon);
  if (host == "localhost") {
    host = "127.0.0.1";
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw ConfigError(
        fmt::format("TCP address '{}': '{}' is not an IPv4 address", o.tcp_address, host));
  }
  UniqueFd fd(
      check_posix(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket", o.tcp_address));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    if (err == EADDRINUSE) {
      throw ConfigError(fmt::format(
          "TCP address {} is in use by another process; stop it or choose another address",
          o.tcp_address));
    }
    throw_posix_error("bind", o.tcp_address, err);
  }
  check_posix(::listen(fd.get(), 128), "listen", o.tcp_address);
  socklen_t len = sizeof(addr);
  check_posix(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), "getsockname",
              o.tcp_address);
  *port_out = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  UniqueFd listen_fd;
  std::string address;
  int port = 0;
  MHD_Daemon* daemon = nullptr;
  std::atomic<bool> stopping{false};
  std::unique_ptr<PeerLimits> connections;  // per peer
  std::unique_ptr<PeerLimits> streams;      // per peer
  std::unique_ptr<PeerLimits> all_streams;  // the total, as one peer ""

  // A connection's peer, kept for its whole life (the library's socket context).
  struct ConnectionSlot {
    std::string peer;
    bool counted = false;
    std::optional<PeerCredentials> credentials;  // Unix sockets: as at connect()
  };

  // The Unix-socket peer's credentials (SO_PEERCRED), with a pidfd of it where its pid is
  // invisible here and the kernel gives one.
  static std::optional<PeerCredentials> credentials_of(int fd) {
    static std::atomic<uint64_t> connections{0};
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return std::nullopt;
    }
    PeerCredentials peer{cred.pid, cred.uid, cred.gid, nullptr, ++connections};
    if (cred.pid == 0) {
      // Linux's SO_PEERPIDFD (77 on every architecture but alpha, mips, parisc and sparc; not
      // in bookworm's headers): ENOPROTOOPT on kernels before 6.5.
      constexpr int kSoPeerPidfd = 77;
      int pidfd = -1;
      socklen_t fd_len = sizeof(pidfd);
      if (::getsockopt(fd, SOL_SOCKET, kSoPeerPidfd, &pidfd, &fd_len) == 0 && pidfd >= 0) {
        peer.pidfd = std::make_shared<const UniqueFd>(pidfd);
      }
    }
    return peer;
  }

  static void on_connection(void* cls, MHD_Connection* connection, void** socket_context,
                            MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<Impl*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* slot = new ConnectionSlot;
      *socket_context = slot;
      const auto* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      if (info == nullptr) {
        return;
      }
      slot->peer = peer_of_socket(info->connect_fd);
      if (self->options.mode == ServerOptions::Mode::kUnixSocket) {
        slot->credentials = credentials_of(info->connect_fd);
      }
      slot->counted = self->connections->acquire(slot->peer);
      if (!slot->counted) {
        // Over its cap: closed before a byte is read, so it holds no thread for long and no
        // other peer's slot.
        if (self->connections->held(slot->peer) == self->connections->max_per_peer()) {
          logger().warn("http: {} holds {} connections to {}, its cap: further ones are closed",
                        slot->peer.empty() ? "a peer" : slot->peer,
                        self->connections->max_per_peer(), self->address);
        }
        ::shutdown(info->connect_fd, SHUT_RDWR);
      }
      return;
    }
    auto* slot = static_cast<ConnectionSlot*>(*socket_context);
    if (slot != nullptr) {
      if (slot->counted) {
        self->connections->release(slot->peer);
      }
      delete slot;
      *socket_context = nullptr;
    }
  }

  // Queues a response; a stream takes a slot of its peer's and of the total, or is answered 429.
  MHD_Result queue_response(MHD_Connection* connection, Response response) {
    if (response.stream == nullptr) {
      return queue(connection, std::move(response), stopping);
    }
    // The peer on_connection found when the connection was accepted.
    std::string peer;
    if (const auto* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        info != nullptr && info->socket_context != nullptr) {
      peer = static_cast<const ConnectionSlot*>(info->socket_context)->peer;
    }
    if (!streams->acquire(peer)) {
      return reply_error(connection, 429,
                         fmt::format("{} has {} event streams open here, its cap; close one",
                                     peer.empty() ? "this peer" : peer, streams->max_per_peer()));
    }
    if (!all_streams->acquire("")) {
      streams->release(peer);
      return reply_error(connection, 429,
                         fmt::format("this server has {} event streams open, its cap; try later",
                                     all_streams->max_per_peer()));
    }
    return queue(connection, std::move(response), stopping, [this, peer] {
      streams->release(peer);
      all_streams->release("");
    });
  }

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url,
                               const char* method, const char* /*version*/, const char* upload_data,
                               size_t* upload_data_size, void** request_cls) {
    auto* self = static_cast<Impl*>(cls);
    auto* state = static_cast<RequestState*>(*request_cls);
    if (state == nullptr) {
      state = new RequestState;
      *request_cls = state;
      // A declared body over the bound is refused before any of it is read.
      const char* length =
          MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
      if (length != nullptr) {
        const auto n = parse_number<unsigned long long>(length);
        if (!n || *n > self->options.max_body_bytes) {
          return self->reply_error(connection, 413, "request body too large");
        }
      }
      return MHD_YES;
    }
    if (*upload_data_size != 0) {
      state->body_bytes += *upload_data_size;
      if (state->body_bytes > self->options.max_body_bytes) {
        state->body_too_large = true;  // chunked: answered when the request ends
        state->body.clear();
      } else {
        state->body.append(upload_data, *upload_data_size);
      }
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (state->body_too_large) {
      return self->reply_error(connection, 413, "request body too large");
    }
    return self->serve(connection, url, method, *state);
  }

  static void on_completed(void* /*cls*/, MHD_Connection* /*connection*/, void** request_cls,
                           MHD_RequestTerminationCode /*code*/) {
    delete static_cast<RequestState*>(*request_cls);
    *request_cls = nullptr;
  }

  static void on_log(void* /*cls*/, const char* format, va_list args) {
    char buf[512];
    std::vsnprintf(buf, sizeof(buf), format, args);
    std::string line(buf);
    while (!line.empty() && line.back() == '\n') {
      line.pop_back();
    }
    logger().debug("http (libmicrohttpd): {}", line);
  }

  MHD_Result reply_error(MHD_Connection* connection, int status, const std::string& what) {
    return queue(connection, Response::json(status, fmt::format(R"({{"error":"{}"}})", what)),
                 stopping);
  }

  MHD_Result serve(MHD_Connection* connection, const char* url, const char* method,
                   RequestState& state) {
    Request request;
    request.method = method;
    request.path = url;
    request.body_bytes = state.body_bytes;
    request.body = std::move(state.body);
    size_t header_count = 0;
    MHD_get_connection_values(
        connection, MHD_HEADER_KIND,
        [](void* cls, MHD_ValueKind, const char* key, const char* value) -> MHD_Result {
          auto* r = static_cast<Request*>(cls);
          r->headers[to_lower(key)] = value != nullptr ? value : "";
          return MHD_YES;
        },
        &request);
    header_count = static_cast<size_t>(
        MHD_get_connection_values(connection, MHD_HEADER_KIND, nullptr, nullptr));
    if (header_count > options.max_header_count) {
      return reply_error(connection, 431, "too many header fields");
    }
    MHD_get_connection_values(
        connection, MHD_GET_ARGUMENT_KIND,
        [](void* cls, MHD_ValueKind, const char* key, const char* value) -> MHD_Result {
          auto* r = static_cast<Request*>(cls);
          r->query.emplace_back(key, value != nullptr ? value : "");
          if (value == nullptr) {
            r->valueless.emplace_back(key);
          }
          return MHD_YES;
        },
        &request);
    if (const auto* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        info != nullptr && info->socket_context != nullptr) {
      request.peer = static_cast<const ConnectionSlot*>(info->socket_context)->credentials;
    }
    Response response;
    try {
      response = handler(request);
    } catch (const std::exception& e) {
      logger().error("http: {} {} failed: {}", request.method, request.path, e.what());
      response = Response::json(500, nlohmann_free_error(e.what()));
    }
    return queue_response(connection, std::move(response));
  }

  // {"error": text} without pulling a JSON library into the server.
  static std::string nlohmann_free_error(std::string_view text) {
    std::string out = R"({"error":")";
    for (const char ch : text) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
        out += ch;
      } else if (static_cast<unsigned char>(ch) < 0x20) {
        out += ' ';
      } else {
        out += ch;
      }
    }
    return out + "\"}";
  }
};

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.handler = std::move(handler);
  const bool unix_socket = s.options.mode == ServerOptions::Mode::kUnixSocket;
  if (unix_socket) {
    s.listen_fd = unix_listener(s.options);
    s.address = s.options.socket_path;
  } else {
    s.listen_fd = tcp_listener(s.options, &s.port);
    s.address = fmt::format("127.0.0.1:{}", s.port);
    if (auto colon = s.options.tcp_address.rfind(':'); colon != std::string::npos) {
      s.address = fmt::format("{}:{}", s.options.tcp_address.substr(0, colon), s.port);
    }
  }
  // A thread per connection: a stream blocks its own thread between events, and a slow client
  // holds only its own. poll(), not select(): hundreds of connections exceed FD_SETSIZE's reach.
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                         MHD_USE_POLL | MHD_USE_ERROR_LOG;
  const auto per_peer = [](unsigned given, unsigned total) {
    return given != 0 ? std::min(given, total) : default_per_peer(total);
  };
  s.connections = std::make_unique<PeerLimits>(
      per_peer(s.options.max_connections_per_peer, s.options.max_connections));
  s.streams =
      std::make_unique<PeerLimits>(per_peer(s.options.max_streams_per_peer, s.options.max_streams));
  s.all_streams = std::make_unique<PeerLimits>(s.options.max_streams);
  s.daemon = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Impl::on_request, &s,                     //
      MHD_OPTION_LISTEN_SOCKET, static_cast<MHD_socket>(s.listen_fd.get()),  //
      MHD_OPTION_CONNECTION_LIMIT, s.options.max_connections,                //
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(s.options.idle_timeout.count()),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, s.options.memory_limit_bytes,  //
      MHD_OPTION_NOTIFY_COMPLETED, &Impl::on_completed, &s,              //
      MHD_OPTION_NOTIFY_CONNECTION, &Impl::on_connection, &s,            //
      MHD_OPTION_EXTERNAL_LOGGER, &Impl::on_log, &s,                     //
      MHD_OPTION_END);
  if (s.daemon == nullptr) {
    throw IoError(
        fmt::format("cannot start the HTTP server on {} (libmicrohttpd refused; "
                    "run with a debug log level for its reason)",
                    s.address));
  }
  (void)s.listen_fd.release();  // MHD_stop_daemon closes it
}

Server::~Server() {
  impl_->stopping = true;  // streams end within one wait
  MHD_stop_daemon(impl_->daemon);
  if (impl_->options.mode == ServerOptions::Mode::kUnixSocket) {
    ::unlink(impl_->options.socket_path.c_str());
  }
}

const std::string& Server::address() const {
  return impl_->address;
}
int Server::tcp_port() const {
  return impl_->port;
}

}  // namespace zeus::http
