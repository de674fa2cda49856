#include "zeus/launch/c10d/client.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/launch/c10d/line.h"
#include "zeus/launch/ports.h"
#include "zeus/launch/tcp.h"

namespace zeus::launch::c10d {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

class Client::Impl {
 public:
  Impl(std::string host, int port, RendezvousOptions o, RendezvousNode node)
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
    send(Join{node_.host, node_.nproc});
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
      for (const Message& m : read(left)) {
        if (const auto* w = std::get_if<Waiting>(&m)) {
          joined = w->joined;
        } else if (const auto* request = std::get_if<PortRequest>(&m)) {
          // This node hosts the workers' store: a port free now, as the round closes.
          send(PortReply{request->round, pick_free_port(node_.host)});
        } else if (const auto* r = std::get_if<Round>(&m)) {
          return RendezvousRound{r->round,      r->node_rank,   r->nnodes,     r->world_size,
                                 r->first_rank, r->master_addr, r->master_port};
        } else if (const auto* a = std::get_if<Abort>(&m)) {
          throw DistError(
              fmt::format("rendezvous '{}' at {}:{}: {}", o_.run_id, host_, port_, a->reason));
        }
      }
    }
  }

  std::optional<RendezvousNotice> wait_notice(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    do {
      std::vector<Message> messages;
      try {
        messages = read(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      } catch (const DistError& e) {
        return RendezvousNotice{RendezvousNotice::Kind::kAbort, e.what()};
      }
      for (const Message& m : messages) {
        if (const auto* r = std::get_if<Restart>(&m)) {
          return RendezvousNotice{RendezvousNotice::Kind::kRestart, r->reason};
        }
        if (const auto* a = std::get_if<Abort>(&m)) {
          return RendezvousNotice{RendezvousNotice::Kind::kAbort, a->reason};
        }
      }
    } while (Clock::now() < deadline);
    return std::nullopt;
  }

  void report_failure(const std::string& why) { send(Failed{why}); }
  void report_done() { send(Done{}); }
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
        line_ = std::make_unique<Line>(std::move(fd), Channel(Channel::Side::kClient, o_.token));
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
        line_->send(Heartbeat{});  // under mu_: the channel counts what it signs
      }
    });
  }

  void handshake(Clock::time_point deadline) {
    send(Hello{o_.run_id, {}, false});
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
      for (const Message& m : read(left)) {
        if (const auto* w = std::get_if<Welcome>(&m)) {
          if (w->auth && !o_.token) {
            throw AuthError(fmt::format(
                "rendezvous '{}' at {}:{} requires a token and this node has none: give it the "
                "same --rdzv-conf token_file (or ZEUS_RDZV_TOKEN_FILE) as the other nodes",
                o_.run_id, host_, port_));
          }
          return;
        }
        if (const auto* r = std::get_if<Refused>(&m)) {
          throw DistError(
              fmt::format("rendezvous '{}' at {}:{}: {}", o_.run_id, host_, port_, r->reason));
        }
        throw DistError(fmt::format("rendezvous '{}': {}:{} answered the hello with '{}'",
                                    o_.run_id, host_, port_, op_name(m)));
      }
    }
  }

  void send(const Message& m) {
    std::lock_guard lock(mu_);
    if (!line_->send(m)) {
      throw DistError(
          fmt::format("rendezvous '{}': the endpoint {}:{} went away (its zeus run "
                      "ended)",
                      o_.run_id, host_, port_));
    }
  }

  // Messages that arrive within `timeout` (possibly none). Throws DistError when the endpoint
  // closed the connection (after the messages that came before the close) or sent something
  // that is not a message of this protocol.
  std::vector<Message> read(milliseconds timeout) {
    if (closed_) {
      throw DistError(fmt::format(
          "rendezvous '{}': the endpoint {}:{} closed the connection (its zeus run ended, or it "
          "is not a zeus rendezvous)",
          o_.run_id, host_, port_));
    }
    pollfd p{line_->fd(), POLLIN, 0};
    std::vector<std::string> lines;
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
    closed_ = rc > 0 && !line_->receive(lines);
    std::vector<Message> out;
    for (const auto& text : lines) {
      try {
        std::lock_guard lock(mu_);
        out.push_back(line_->channel().open(text));
      } catch (const AuthError& e) {
        throw AuthError(fmt::format("rendezvous '{}' at {}:{}: {}; this node does not join",
                                    o_.run_id, host_, port_, e.what()));
      } catch (const DistError& e) {
        throw DistError(
            fmt::format("rendezvous '{}': {}:{} does not speak the zeus rendezvous "
                        "protocol: {}",
                        o_.run_id, host_, port_, e.what()));
      }
    }
    if (closed_ && out.empty()) {
      return read(timeout);  // says so
    }
    return out;
  }

  static constexpr milliseconds kHandshake{5'000};
  std::string host_;
  int port_;
  RendezvousOptions o_;
  RendezvousNode node_;
  std::unique_ptr<Line> line_;
  bool closed_ = false;  // the endpoint closed the connection
  std::mutex mu_;        // sends: the caller's and the heartbeat thread's
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

Client::Client(std::string endpoint_host, int endpoint_port, RendezvousOptions options,
               RendezvousNode node)
    : impl_(std::make_unique<Impl>(std::move(endpoint_host), endpoint_port, std::move(options),
                                   std::move(node))) {}
Client::~Client() = default;
RendezvousRound Client::join() {
  return impl_->join();
}
std::optional<RendezvousNotice> Client::wait_notice(milliseconds timeout) {
  return impl_->wait_notice(timeout);
}
void Client::report_failure(const std::string& why) {
  impl_->report_failure(why);
}
void Client::report_done() {
  impl_->report_done();
}
int Client::fd() const {
  return impl_->fd();
}

}  // namespace zeus::launch::c10d
