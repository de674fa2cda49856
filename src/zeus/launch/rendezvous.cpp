#include "zeus/launch/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/launch/ports.h"
#include "zeus/launch/rendezvous_protocol.h"
#include "zeus/launch/rendezvous_rounds.h"

namespace zeus::launch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

// A TCP connection carrying one message per line (rendezvous_protocol.h).
class Line {
 public:
  explicit Line(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }

  // Sends one message; false when the peer is gone (the caller drops it).
  bool send(const rdzv::Message& message) {
    const std::string text = rdzv::encode(message) + "\n";
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::send(fd_.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads what is available (the fd polled readable) and appends complete lines to `out`;
  // false at end of stream, on an error, or past kMaxLine bytes without a newline.
  bool receive(std::vector<std::string>& out) {
    char chunk[4096];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      return true;
    }
    if (n <= 0) {
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
      out.push_back(buffer_.substr(0, nl));
      buffer_.erase(0, nl + 1);
    }
    return buffer_.size() < kMaxLine;
  }

 private:
  static constexpr size_t kMaxLine = 1 << 16;
  UniqueFd fd_;
  std::string buffer_;
};

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    throw ConfigError(fmt::format("rendezvous endpoint host '{}' does not resolve: {}", host,
                                  ::gai_strerror(rc)));
  }
  return found;
}

UniqueFd listen_on(const std::string& addr, int port, int* bound_port) {
  addrinfo* found = resolve(addr, port, true);
  int last_errno = 0;
  UniqueFd fd;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.get() < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), 64) == 0) {
      fd = std::move(s);
      break;
    }
    last_errno = errno;
  }
  ::freeaddrinfo(found);
  if (fd.get() < 0) {
    const auto holder = port_in_use(addr, port);
    throw IoError(
        fmt::format("the rendezvous cannot listen on {}:{}: {}{}; pick another "
                    "--rdzv-endpoint port",
                    addr, port, errno_string(last_errno), holder ? " (" + *holder + ")" : ""));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

// One attempt of at most `timeout`; -1 fd (and *error set to why) when none of the host's
// addresses accepted.
UniqueFd connect_to(const std::string& host, int port, milliseconds timeout, std::string* error) {
  addrinfo* found = resolve(host, port, false);
  UniqueFd fd;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (s.get() < 0) {
      *error = errno_string(errno);
      continue;
    }
    int rc = ::connect(s.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd w{s.get(), POLLOUT, 0};
      rc = ::poll(&w, 1, static_cast<int>(timeout.count()));
      int so_error = ETIMEDOUT;
      socklen_t len = sizeof so_error;
      if (rc > 0) {
        ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      }
      rc = so_error == 0 ? 0 : -1;
      errno = so_error;
    }
    if (rc != 0) {
      *error = errno_string(errno);
      continue;
    }
    ::fcntl(s.get(), F_SETFL, ::fcntl(s.get(), F_GETFL) & ~O_NONBLOCK);
    const int one = 1;
    ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd = std::move(s);
    break;
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

// ---- server ---------------------------------------------------------------------------------

class RendezvousServer::Impl {
 public:
  Impl(const std::string& addr, int port, RendezvousOptions o)
      : keeper_(o, Clock::now()), run_id_(o.run_id) {
    listen_ = listen_on(addr, port, &port_);
    int pipe_fds[2];
    check_posix(::pipe2(pipe_fds, O_CLOEXEC), "pipe", "rendezvous");
    wake_read_ = UniqueFd(pipe_fds[0]);
    wake_write_ = UniqueFd(pipe_fds[1]);
    thread_ = std::thread([this] { serve(); });
  }
  ~Impl() {
    stop_ = true;
    const char c = 'x';
    [[maybe_unused]] const ssize_t n = ::write(wake_write_.get(), &c, 1);
    thread_.join();
  }
  int port() const { return port_; }
  bool wait_finished(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!over_ && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return over_;
  }

 private:
  // The shell: sockets in, decoded messages and the time to the keeper, its actions out.
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
      std::vector<PeerId> ids;
      for (const auto& [id, line] : lines_) {
        fds.push_back({line->fd(), POLLIN, 0});
        ids.push_back(id);
      }
      ::poll(fds.data(), fds.size(), 20);
      if (fds[0].revents & POLLIN) {
        UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (client.get() >= 0) {
          const PeerId id = next_id_++;
          lines_[id] = std::make_unique<Line>(std::move(client));
          apply(keeper_.connected(id, Clock::now()));
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        const PeerId id = ids[i - 2];
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || lines_.count(id) == 0) {
          continue;
        }
        std::vector<std::string> received;
        const bool open = lines_.at(id)->receive(received);
        for (const auto& text : received) {
          if (lines_.count(id) == 0) {
            break;  // closed by an earlier message's action
          }
          try {
            const rdzv::Message m = rdzv::decode(text);
            apply(keeper_.received(id, m, Clock::now()));
          } catch (const DistError& e) {
            apply(keeper_.malformed(id, e.what(), Clock::now()));
          }
        }
        if (!open && lines_.erase(id) != 0) {
          apply(keeper_.disconnected(id, Clock::now()));
        }
      }
      apply(keeper_.tick(Clock::now()));
      over_ = keeper_.over();
    }
  }

  void apply(const RdzvActions& actions) {
    std::vector<PeerId> gone;
    for (const auto& s : actions.send) {
      const auto it = lines_.find(s.to);
      if (it != lines_.end() && !it->second->send(s.message)) {
        gone.push_back(s.to);
      }
    }
    for (PeerId id : actions.close) {
      lines_.erase(id);
    }
    for (PeerId id : gone) {
      if (lines_.erase(id) != 0) {
        apply(keeper_.disconnected(id, Clock::now()));
      }
    }
  }

  RoundKeeper keeper_;
  std::string run_id_;
  UniqueFd listen_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> over_{false};  // finished or aborted: read by wait_finished()
  std::thread thread_;
  // Touched by the serving thread only.
  std::map<PeerId, std::unique_ptr<Line>> lines_;
  PeerId next_id_ = 1;
};

RendezvousServer::RendezvousServer(const std::string& bind_addr, int port,
                                   RendezvousOptions options)
    : impl_(std::make_unique<Impl>(bind_addr, port, std::move(options))) {}
RendezvousServer::~RendezvousServer() = default;
int RendezvousServer::port() const {
  return impl_->port();
}
bool RendezvousServer::wait_finished(milliseconds timeout) {
  return impl_->wait_finished(timeout);
}

// ---- client ---------------------------------------------------------------------------------

class RendezvousClient::Impl {
 public:
  Impl(std::string host, int port, RendezvousOptions o, Node node)
      : host_(std::move(host)), port_(port), o_(std::move(o)), node_(std::move(node)) {}
  ~Impl() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable()) {
      heartbeat_.join();
    }
  }

  RendezvousRound join() {
    const auto deadline = Clock::now() + o_.join_timeout;
    connect(deadline);
    send(rdzv::Join{node_.host, node_.nproc});
    int joined = 0;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0)) {
        throw TimeoutError(
            fmt::format("rendezvous '{}' at {}:{}: {} node(s) joined, at least {} needed, within "
                        "join_timeout {:.1f} s; start the other nodes' zeus run with the same "
                        "--rdzv-endpoint and --rdzv-id, or lower MIN in --nnodes",
                        o_.run_id, host_, port_, joined, o_.min_nodes, seconds(o_.join_timeout)));
      }
      for (const rdzv::Message& m : read(left)) {
        if (const auto* w = std::get_if<rdzv::Waiting>(&m)) {
          joined = w->joined;
        } else if (const auto* request = std::get_if<rdzv::PortRequest>(&m)) {
          // This node hosts the workers' store: a port free now, as the round closes.
          send(rdzv::PortReply{request->round, pick_free_port(node_.host)});
        } else if (const auto* r = std::get_if<rdzv::Round>(&m)) {
          return RendezvousRound{r->round,      r->node_rank,   r->nnodes,     r->world_size,
                                 r->first_rank, r->master_addr, r->master_port};
        } else if (const auto* a = std::get_if<rdzv::Abort>(&m)) {
          throw DistError(
              fmt::format("rendezvous '{}' at {}:{}: {}", o_.run_id, host_, port_, a->reason));
        }
      }
    }
  }

  std::optional<RendezvousNotice> wait_notice(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    do {
      std::vector<rdzv::Message> messages;
      try {
        messages = read(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      } catch (const DistError& e) {
        return RendezvousNotice{RendezvousNotice::Kind::kAbort, e.what()};
      }
      for (const rdzv::Message& m : messages) {
        if (const auto* r = std::get_if<rdzv::Restart>(&m)) {
          return RendezvousNotice{RendezvousNotice::Kind::kRestart, r->reason};
        }
        if (const auto* a = std::get_if<rdzv::Abort>(&m)) {
          return RendezvousNotice{RendezvousNotice::Kind::kAbort, a->reason};
        }
      }
    } while (Clock::now() < deadline);
    return std::nullopt;
  }

  void report_failure(const std::string& why) { send(rdzv::Failed{why}); }
  void report_done() { send(rdzv::Done{}); }
  int fd() const { return line_ ? line_->fd() : -1; }

 private:
  // Connects (retrying while nothing listens: the endpoint's launcher may start later, and
  // says so every kWaitNote), then the handshake: an endpoint that accepts but does not answer
  // as a rendezvous of this run is an error at once, not a wait of the whole join_timeout.
  void connect(Clock::time_point deadline) {
    if (line_) {
      return;
    }
    constexpr milliseconds kAttempt{2'000};
    constexpr milliseconds kWaitNote{10'000};
    auto next_note = Clock::now() + kWaitNote;
    std::string why;
    for (;;) {
      UniqueFd fd = connect_to(host_, port_, kAttempt, &why);
      if (fd.get() >= 0) {
        line_ = std::make_unique<Line>(std::move(fd));
        break;
      }
      if (Clock::now() >= deadline) {
        throw TimeoutError(fmt::format(
            "rendezvous '{}': nothing listens on {}:{} within join_timeout {:.1f} s ({}); start "
            "the zeus run of the endpoint's host (it serves the rendezvous) or fix "
            "--rdzv-endpoint",
            o_.run_id, host_, port_, seconds(o_.join_timeout), why));
      }
      if (Clock::now() >= next_note) {
        logger().warn(
            "rendezvous '{}': still no answer from {}:{} ({}); waiting up to "
            "join_timeout {:.1f} s for the zeus run there",
            o_.run_id, host_, port_, why, seconds(o_.join_timeout));
        next_note += kWaitNote;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    handshake(std::min(deadline, Clock::now() + kHandshake));
    heartbeat_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, o_.heartbeat, [this] { return stop_; })) {
        line_->send(rdzv::Heartbeat{});
      }
    });
  }

  void handshake(Clock::time_point deadline) {
    send(rdzv::Hello{o_.run_id});
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left <= milliseconds(0)) {
        line_.reset();
        throw DistError(fmt::format(
            "rendezvous '{}': {}:{} accepted the connection but did not answer as a zeus "
            "rendezvous within {:.1f} s; --rdzv-endpoint points at another program (use the "
            "host and port of the node whose zeus run serves the rendezvous)",
            o_.run_id, host_, port_, seconds(kHandshake)));
      }
      for (const rdzv::Message& m : read(left)) {
        if (std::holds_alternative<rdzv::Welcome>(m)) {
          return;
        }
        if (const auto* r = std::get_if<rdzv::Refused>(&m)) {
          throw DistError(
              fmt::format("rendezvous '{}' at {}:{}: {}", o_.run_id, host_, port_, r->reason));
        }
        throw DistError(fmt::format("rendezvous '{}': {}:{} answered the hello with '{}'",
                                    o_.run_id, host_, port_, rdzv::op_name(m)));
      }
    }
  }

  void send(const rdzv::Message& m) {
    std::lock_guard lock(mu_);
    if (!line_->send(m)) {
      throw DistError(
          fmt::format("rendezvous '{}': the endpoint {}:{} went away (its zeus run "
                      "ended)",
                      o_.run_id, host_, port_));
    }
  }

  // Messages that arrive within `timeout` (possibly none). Throws DistError when the endpoint
  // closed the connection or sent something that is not a message of this protocol.
  std::vector<rdzv::Message> read(milliseconds timeout) {
    pollfd p{line_->fd(), POLLIN, 0};
    std::vector<std::string> lines;
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    if (rc > 0 && !line_->receive(lines)) {
      throw DistError(fmt::format(
          "rendezvous '{}': the endpoint {}:{} closed the connection (its zeus run ended, or it "
          "is not a zeus rendezvous)",
          o_.run_id, host_, port_));
    }
    std::vector<rdzv::Message> out;
    for (const auto& text : lines) {
      try {
        out.push_back(rdzv::decode(text));
      } catch (const DistError& e) {
        throw DistError(
            fmt::format("rendezvous '{}': {}:{} does not speak the zeus rendezvous "
                        "protocol: {}",
                        o_.run_id, host_, port_, e.what()));
      }
    }
    return out;
  }

  static constexpr milliseconds kHandshake{5'000};
  std::string host_;
  int port_;
  RendezvousOptions o_;
  Node node_;
  std::unique_ptr<Line> line_;
  std::mutex mu_;  // sends: the caller's and the heartbeat thread's
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

RendezvousClient::RendezvousClient(std::string endpoint_host, int endpoint_port,
                                   RendezvousOptions options, Node node)
    : impl_(std::make_unique<Impl>(std::move(endpoint_host), endpoint_port, std::move(options),
                                   std::move(node))) {}
RendezvousClient::~RendezvousClient() = default;
RendezvousRound RendezvousClient::join() {
  return impl_->join();
}
std::optional<RendezvousNotice> RendezvousClient::wait_notice(milliseconds timeout) {
  return impl_->wait_notice(timeout);
}
void RendezvousClient::report_failure(const std::string& why) {
  impl_->report_failure(why);
}
void RendezvousClient::report_done() {
  impl_->report_done();
}
int RendezvousClient::fd() const {
  return impl_->fd();
}

}  // namespace zeus::launch
