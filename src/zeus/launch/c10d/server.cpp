#include "zeus/launch/c10d/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/launch/c10d/line.h"
#include "zeus/launch/c10d/round_keeper.h"
#include "zeus/launch/refusal_log.h"
#include "zeus/launch/tcp.h"

namespace zeus::launch::c10d {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class Server::Impl {
 public:
  Impl(const std::string& addr, int port, RendezvousOptions o)
      : keeper_(o, Clock::now()),
        handshake_(std::min(kHandshake, o.keep_alive / 2)),
        run_id_(o.run_id),
        token_(o.token),
        refusals_(fmt::format("rendezvous '{}'", o.run_id)) {
    listen_ = listen_on(addr, port, &port_);
    if (!token_ && !bound_to_loopback(listen_.get())) {
      logger().warn(
          "rendezvous '{}' listens on {}:{} without a token: anyone who can reach this port can "
          "join the run as a node, become its master (the address every worker connects to) and "
          "force every worker to restart. Close it: the same secret on every node in a file of "
          "mode 600, --rdzv-conf token_file=PATH (or ZEUS_RDZV_TOKEN_FILE)",
          run_id_, addr.empty() ? "*" : addr, port_);
    }
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
  long refused() const { return refused_; }
  bool wait_finished(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!over_ && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    return over_;
  }

 private:
  struct Conn {
    std::unique_ptr<Line> line;
    Clock::time_point accepted;
    bool joined = false;    // its Join reached the keeper: no longer pending
    bool welcomed = false;  // a keyed Hello was answered: the next line must be signed
  };

  // The shell: sockets in, decoded messages and the time to the keeper, its actions out.
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
      std::vector<PeerId> ids;
      for (const auto& [id, conn] : conns_) {
        fds.push_back({conn.line->fd(), POLLIN, 0});
        ids.push_back(id);
      }
      ::poll(fds.data(), fds.size(), 20);
      if (fds[0].revents & POLLIN) {
        accept();
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        const PeerId id = ids[i - 2];
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || conns_.count(id) == 0) {
          continue;
        }
        std::vector<std::string> received;
        std::string why;
        const bool open = conns_.at(id).line->receive(received, &why);
        for (const auto& text : received) {
          if (conns_.count(id) == 0) {
            break;  // closed by an earlier message's action
          }
          receive(id, text);
        }
        if (!open && conns_.count(id) != 0) {
          closed(id, why);
        }
      }
      expire_pending();
      apply(keeper_.tick(Clock::now()));
      over_ = keeper_.over();
    }
  }

  void accept() {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    UniqueFd client(
        ::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC));
    if (client.get() < 0) {
      return;
    }
    const std::string peer = address_of(from);
    if (conns_.size() >= kMaxPeers) {
      note_refusal(peer, fmt::format("{} connections are open already", kMaxPeers));
      return;  // closed at once
    }
    std::vector<PeerId> pending;
    for (const auto& [id, conn] : conns_) {
      if (!conn.joined) {
        pending.push_back(id);  // ids grow with time: the first is the oldest
      }
    }
    if (pending.size() >= kMaxPending) {
      refuse(pending.front(),
             fmt::format("evicted: {} connections had not joined yet (a newer one came)",
                         kMaxPending));
    }
    const PeerId id = next_id_++;
    conns_[id] = Conn{
        std::make_unique<Line>(std::move(client), Channel(Channel::Side::kServer, token_), peer),
        Clock::now()};
    apply(keeper_.connected(id, Clock::now()));
  }

  // One line from a peer: checked by its channel (a token's signature and counter), the
  // handshake's version and token agreement, then the keeper. A peer that fails is told why and
  // closed.
  void receive(PeerId id, const std::string& text) {
    Conn& conn = conns_.at(id);
    Message m;
    try {
      m = conn.line->channel().open(text);
    } catch (const VersionMismatch& e) {
      refuse(id, fmt::format("this rendezvous speaks protocol version {} and the node version {}: "
                             "run the same zeus-cpp on every node",
                             kVersion, e.peer_version()));
      return;
    } catch (const AuthError& e) {
      refuse(id, e.what());
      return;
    } catch (const DistError& e) {
      // A member's broken line ends its round (the keeper says why); anyone else's is only the
      // refusal's (rate-limited) line.
      note_refusal(conn.line->peer(), e.what());
      const bool member = conn.joined;
      conns_.erase(id);
      apply(member ? keeper_.malformed(id, e.what(), Clock::now())
                   : keeper_.disconnected(id, Clock::now()));
      return;
    }
    if (const auto* hello = std::get_if<Hello>(&m)) {
      if (token_ && !hello->auth) {
        refuse(id,
               "this rendezvous requires a token and the node has none: give it the same "
               "--rdzv-conf token_file (or ZEUS_RDZV_TOKEN_FILE) as the other nodes");
        return;
      }
      if (!token_ && hello->auth) {
        refuse(id,
               "the node has a rendezvous token and this rendezvous has none: give every node "
               "the same --rdzv-conf token_file (or none)");
        return;
      }
      if (!conn.line->channel().begun()) {
        conn.line->channel().begin(hello->nonce);
        conn.welcomed = token_.has_value();
      }
    } else if (std::holds_alternative<Join>(m)) {
      conn.joined = true;
    }
    apply(keeper_.received(id, m, Clock::now()));
  }

  // The peer closed its connection (or sent a line too long: `why`).
  void closed(PeerId id, const std::string& why) {
    const Conn& conn = conns_.at(id);
    if (!why.empty()) {
      note_refusal(conn.line->peer(), why);
    } else if (conn.welcomed && conn.line->channel().received() == 0) {
      note_refusal(conn.line->peer(),
                   "closed the connection after the welcome without a signed message: its "
                   "rendezvous token may differ from this run's");
    }
    conns_.erase(id);
    apply(keeper_.disconnected(id, Clock::now()));
  }

  void expire_pending() {
    const auto now = Clock::now();
    std::vector<PeerId> late;
    for (const auto& [id, conn] : conns_) {
      if (!conn.joined && now - conn.accepted > handshake_) {
        late.push_back(id);
      }
    }
    for (PeerId id : late) {
      refuse(id, fmt::format("did not join within {:.1f} s of connecting",
                             std::chrono::duration<double>(handshake_).count()));
    }
  }

  void refuse(PeerId id, const std::string& why) {
    Conn& conn = conns_.at(id);
    note_refusal(conn.line->peer(), why);
    conn.line->send(Refused{why});
    conns_.erase(id);
    apply(keeper_.disconnected(id, Clock::now()));
  }

  void note_refusal(const std::string& peer, const std::string& why) {
    refusals_.refused(peer, why);
    refused_ = refusals_.total();
  }

  void apply(const RdzvActions& actions) {
    std::vector<PeerId> gone;
    for (const auto& s : actions.send) {
      const auto it = conns_.find(s.to);
      if (it != conns_.end() && !it->second.line->send(s.message)) {
        gone.push_back(s.to);
      }
    }
    for (PeerId id : actions.close) {
      conns_.erase(id);
    }
    for (PeerId id : gone) {
      if (conns_.erase(id) != 0) {
        apply(keeper_.disconnected(id, Clock::now()));
      }
    }
  }

  RoundKeeper keeper_;
  milliseconds handshake_;  // to join after connecting: within the keeper's silence limit
  std::string run_id_;
  std::optional<std::string> token_;
  RefusalLog refusals_;
  UniqueFd listen_;
  UniqueFd wake_read_;
  UniqueFd wake_write_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> over_{false};  // finished or aborted: read by wait_finished()
  std::atomic<long> refused_{0};
  std::thread thread_;
  // Touched by the serving thread only.
  std::map<PeerId, Conn> conns_;
  PeerId next_id_ = 1;
};

Server::Server(const std::string& bind_addr, int port, RendezvousOptions options)
    : impl_(std::make_unique<Impl>(bind_addr, port, std::move(options))) {}
Server::~Server() = default;
int Server::port() const {
  return impl_->port();
}
bool Server::wait_finished(milliseconds timeout) {
  return impl_->wait_finished(timeout);
}
long Server::refused() const {
  return impl_->refused();
}

}  // namespace zeus::launch::c10d
