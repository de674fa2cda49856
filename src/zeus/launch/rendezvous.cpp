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
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/launch/ports.h"

namespace zeus::launch {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

// A TCP connection carrying newline-delimited JSON messages.
class Line {
 public:
  explicit Line(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }

  // Sends one message; false when the peer is gone (the caller drops it).
  bool send(const json& message) {
    const std::string text = message.dump() + "\n";
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

  // Reads what is available (the fd polled readable) and appends complete messages to `out`;
  // false at end of stream or on an error (a malformed line counts as one).
  bool receive(std::vector<json>& out) {
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
      json message = json::parse(buffer_.substr(0, nl), nullptr, /*allow_exceptions=*/false);
      buffer_.erase(0, nl + 1);
      if (message.is_discarded() || !message.is_object() || !message.contains("op")) {
        return false;
      }
      out.push_back(std::move(message));
    }
    return buffer_.size() < (1 << 20);
  }

 private:
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

// One attempt; -1 fd when nothing listens there (yet).
UniqueFd connect_to(const std::string& host, int port) {
  addrinfo* found = resolve(host, port, false);
  UniqueFd fd;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.get() >= 0 && ::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) {
      const int one = 1;
      ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd = std::move(s);
      break;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

// ---- server ---------------------------------------------------------------------------------

class RendezvousServer::Impl {
 public:
  Impl(const std::string& addr, int port, RendezvousOptions o) : o_(std::move(o)) {
    if (o_.min_nodes < 1 || o_.max_nodes < o_.min_nodes) {
      throw ConfigError(
          fmt::format("--nnodes {}:{}: MIN must be >= 1 and <= MAX", o_.min_nodes, o_.max_nodes));
    }
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
  struct Peer {
    explicit Peer(UniqueFd fd) : line(std::move(fd)) {}
    Line line;
    std::string host;
    int nproc = 0;
    int port = 0;
    bool waiting = false;  // joined the next round
    bool member = false;   // in the running round
    bool done = false;
    bool silent = false;  // dropped for its missing heartbeats
    int node_rank = -1;
    Clock::time_point last_seen = Clock::now();
    Clock::time_point joined_at;
  };

  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
      for (const auto& p : peers_) {
        fds.push_back({p->line.fd(), POLLIN, 0});
      }
      ::poll(fds.data(), fds.size(), 20);
      if (fds[0].revents & POLLIN) {
        UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (client.get() >= 0) {
          peers_.push_back(std::make_unique<Peer>(std::move(client)));
        }
      }
      // Handle input; peers that went away are dropped after the scan.
      std::vector<Peer*> gone;
      for (size_t i = 2; i < fds.size(); ++i) {
        Peer* p = peers_[i - 2].get();
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
          continue;
        }
        std::vector<json> messages;
        const bool open = p->line.receive(messages);
        for (const auto& m : messages) {
          handle(*p, m);
        }
        if (!open) {
          gone.push_back(p);
        }
      }
      const auto now = Clock::now();
      for (const auto& p : peers_) {
        if (now - p->last_seen > o_.keep_alive &&
            std::find(gone.begin(), gone.end(), p.get()) == gone.end()) {
          gone.push_back(p.get());
          p->silent = true;
        }
      }
      for (Peer* p : gone) {
        drop(p);
      }
      maybe_close_round();
    }
  }

  void handle(Peer& p, const json& m) {
    p.last_seen = Clock::now();
    const std::string op = m.value("op", "");
    if (op == "join") {
      if (m.value("run_id", "") != o_.run_id) {
        p.line.send({{"op", "error"},
                     {"reason", fmt::format("this endpoint serves rendezvous id '{}', not '{}'; "
                                            "give every node the same --rdzv-id",
                                            o_.run_id, m.value("run_id", ""))}});
        return;
      }
      if (aborted_) {
        p.line.send({{"op", "abort"}, {"reason", abort_reason_}});
        return;
      }
      p.host = m.value("host", "");
      p.nproc = m.value("nproc", 1);
      p.port = m.value("port", 0);
      p.waiting = true;
      p.member = false;
      p.done = false;
      p.joined_at = Clock::now();
      last_join_ = p.joined_at;
      if (running_ && members() < o_.max_nodes) {
        end_round(fmt::format("node {} joined", p.host), /*failure=*/false);
      }
      tell_waiting();
    } else if (op == "failed" && p.member) {
      ++failures_;
      const std::string why = fmt::format("node {} ({}): {}", p.node_rank, p.host,
                                          m.value("reason", "its workers failed"));
      if (failures_ > o_.max_restarts) {
        abort_all(fmt::format("{}; {} failure(s) exceed --max-restarts {}", why, failures_,
                              o_.max_restarts));
      } else {
        end_round(why, /*failure=*/true);
      }
    } else if (op == "done" && p.member) {
      p.done = true;
      if (std::all_of(peers_.begin(), peers_.end(),
                      [](const auto& q) { return !q->member || q->done; })) {
        running_ = false;  // the run is over; nothing more to form
        finished_ = true;
        over_ = true;
      }
    }
  }

  int members() const {
    return static_cast<int>(
        std::count_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->member; }));
  }

  void tell_waiting() {
    const int n = waiting_count();
    for (const auto& p : peers_) {
      if (p->waiting) {
        p->line.send(
            {{"op", "waiting"}, {"joined", n}, {"min", o_.min_nodes}, {"max", o_.max_nodes}});
      }
    }
  }
  int waiting_count() const {
    return static_cast<int>(
        std::count_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->waiting; }));
  }

  void drop(Peer* p) {
    const bool silent = p->silent;
    const bool was_member = p->member && running_ && !p->done;
    const std::string who = fmt::format("node {} ({})", p->node_rank, p->host);
    p->member = false;
    peers_.erase(
        std::find_if(peers_.begin(), peers_.end(), [p](const auto& q) { return q.get() == p; }));
    if (was_member) {
      end_round(
          fmt::format("{} {}", who,
                      silent ? fmt::format("sent no heartbeat for {:.1f} s", seconds(o_.keep_alive))
                             : std::string("left")),
          /*failure=*/false);
    } else {
      tell_waiting();
    }
  }

  void end_round(const std::string& reason, bool failure) {
    logger().warn(
        "rendezvous '{}': round {} ends: {}{}", o_.run_id, round_ - 1, reason,
        failure ? fmt::format(" (failure {} of {} tolerated)", failures_, o_.max_restarts) : "");
    for (const auto& p : peers_) {
      if (p->member) {
        p->member = false;
        p->line.send({{"op", "restart"}, {"reason", reason}});
      }
    }
    running_ = false;
  }

  void abort_all(const std::string& reason) {
    aborted_ = true;
    over_ = true;
    abort_reason_ = reason;
    for (const auto& p : peers_) {
      p->member = p->waiting = false;
      p->line.send({{"op", "abort"}, {"reason", reason}});
    }
    running_ = false;
  }

  void maybe_close_round() {
    if (running_ || aborted_ || finished_) {
      return;
    }
    const int n = waiting_count();
    const bool full = n >= o_.max_nodes;
    const bool last_call = n >= o_.min_nodes && Clock::now() - last_join_ >= o_.last_call;
    if (!full && !last_call) {
      return;
    }
    // In the order they joined, at most MAX: later ones wait for the next round.
    std::vector<Peer*> nodes;
    for (const auto& p : peers_) {
      if (p->waiting) {
        nodes.push_back(p.get());
      }
    }
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const Peer* a, const Peer* b) { return a->joined_at < b->joined_at; });
    nodes.resize(std::min<size_t>(nodes.size(), static_cast<size_t>(o_.max_nodes)));
    int world = 0;
    for (const Peer* p : nodes) {
      world += p->nproc;
    }
    int first = 0;
    for (size_t r = 0; r < nodes.size(); ++r) {
      Peer* p = nodes[r];
      p->waiting = false;
      p->member = true;
      p->node_rank = static_cast<int>(r);
      p->line.send({{"op", "round"},
                    {"round", round_},
                    {"node_rank", r},
                    {"nnodes", nodes.size()},
                    {"world_size", world},
                    {"first_rank", first},
                    {"master_addr", nodes[0]->host},
                    {"master_port", nodes[0]->port}});
      first += p->nproc;
    }
    logger().info("rendezvous '{}': round {} closed with {} node(s), world size {}", o_.run_id,
                  round_, nodes.size(), world);
    ++round_;
    running_ = true;
  }

  RendezvousOptions o_;
  UniqueFd listen_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> over_{false};  // finished or aborted: read by wait_finished()
  std::thread thread_;
  // Touched by the serving thread only.
  std::vector<std::unique_ptr<Peer>> peers_;
  Clock::time_point last_join_ = Clock::now();
  int round_ = 0;
  int failures_ = 0;
  bool running_ = false;
  bool aborted_ = false;
  bool finished_ = false;
  std::string abort_reason_;
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
    send({{"op", "join"},
          {"run_id", o_.run_id},
          {"host", node_.host},
          {"nproc", node_.nproc},
          {"port", pick_free_port(node_.host)}});
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
      for (const json& m : read(left)) {
        const std::string op = m.value("op", "");
        if (op == "waiting") {
          joined = m.value("joined", 0);
        } else if (op == "round") {
          RendezvousRound r;
          r.round = m.value("round", 0);
          r.node_rank = m.value("node_rank", 0);
          r.nnodes = m.value("nnodes", 1);
          r.world_size = m.value("world_size", 1);
          r.first_rank = m.value("first_rank", 0);
          r.master_addr = m.value("master_addr", "");
          r.master_port = m.value("master_port", 0);
          return r;
        } else if (op == "abort" || op == "error") {
          throw DistError(fmt::format("rendezvous '{}' at {}:{}: {}", o_.run_id, host_, port_,
                                      m.value("reason", op)));
        }
      }
    }
  }

  std::optional<RendezvousNotice> wait_notice(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    do {
      std::vector<json> messages;
      try {
        messages = read(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      } catch (const DistError& e) {
        return RendezvousNotice{RendezvousNotice::Kind::kAbort, e.what()};
      }
      for (const json& m : messages) {
        const std::string op = m.value("op", "");
        if (op == "restart") {
          return RendezvousNotice{RendezvousNotice::Kind::kRestart, m.value("reason", "")};
        }
        if (op == "abort") {
          return RendezvousNotice{RendezvousNotice::Kind::kAbort, m.value("reason", "")};
        }
      }
    } while (Clock::now() < deadline);
    return std::nullopt;
  }

  void report(const char* op, const std::string& why) { send({{"op", op}, {"reason", why}}); }
  int fd() const { return line_ ? line_->fd() : -1; }

 private:
  void connect(Clock::time_point deadline) {
    if (line_) {
      return;
    }
    for (;;) {
      UniqueFd fd = connect_to(host_, port_);
      if (fd.get() >= 0) {
        line_ = std::make_unique<Line>(std::move(fd));
        break;
      }
      if (Clock::now() >= deadline) {
        throw TimeoutError(fmt::format(
            "rendezvous '{}': nothing listens on {}:{} within join_timeout {:.1f} s; start the "
            "zeus run of the endpoint's host (it serves the rendezvous) or fix --rdzv-endpoint",
            o_.run_id, host_, port_, seconds(o_.join_timeout)));
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    heartbeat_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, o_.heartbeat, [this] { return stop_; })) {
        line_->send({{"op", "heartbeat"}});
      }
    });
  }

  void send(const json& m) {
    std::lock_guard lock(mu_);
    if (!line_->send(m)) {
      throw DistError(
          fmt::format("rendezvous '{}': the endpoint {}:{} went away (its zeus run "
                      "ended)",
                      o_.run_id, host_, port_));
    }
  }

  // Messages that arrive within `timeout` (possibly none). Throws DistError when the endpoint
  // closed the connection.
  std::vector<json> read(milliseconds timeout) {
    pollfd p{line_->fd(), POLLIN, 0};
    std::vector<json> out;
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    if (rc > 0 && !line_->receive(out)) {
      throw DistError(
          fmt::format("rendezvous '{}': the endpoint {}:{} went away (its zeus run "
                      "ended)",
                      o_.run_id, host_, port_));
    }
    return out;
  }

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
  impl_->report("failed", why);
}
void RendezvousClient::report_done() {
  impl_->report("done", "");
}
int RendezvousClient::fd() const {
  return impl_->fd();
}

}  // namespace zeus::launch
