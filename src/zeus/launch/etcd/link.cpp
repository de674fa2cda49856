#include "zeus/launch/etcd/link.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>

#include "zeus/launch/tcp.h"

namespace zeus::launch::etcd {
namespace {

constexpr std::chrono::milliseconds kConnect{1'000};

}  // namespace

LinkRing::LinkRing(const std::string& host) : listen_(listen_on(host, 0, &port_)) {
  ::fcntl(listen_.get(), F_SETFL, ::fcntl(listen_.get(), F_GETFL) | O_NONBLOCK);
}

bool LinkRing::watch(const std::string& id, const std::string& host, int port) {
  unwatch();
  watched_ = id;
  std::string why;
  UniqueFd fd = connect_to(host, port, kConnect, &why);
  if (fd.get() < 0) {
    lost_ = id;
    return false;
  }
  outgoing_ = std::move(fd);
  return true;
}

void LinkRing::unwatch() {
  outgoing_.reset();
  watched_.clear();
  lost_.reset();
}

void LinkRing::add_to(std::vector<pollfd>& fds) const {
  fds.push_back({listen_.get(), POLLIN, 0});
  if (outgoing_.get() >= 0) {
    fds.push_back({outgoing_.get(), POLLIN, 0});
  }
  for (const auto& fd : incoming_) {
    fds.push_back({fd.get(), POLLIN, 0});
  }
}

void LinkRing::handle(const std::vector<pollfd>& fds) {
  for (const pollfd& p : fds) {
    if (p.revents == 0) {
      continue;
    }
    if (p.fd == listen_.get()) {
      UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (client.get() >= 0) {
        if (incoming_.size() >= kMaxIncoming) {
          incoming_.pop_front();
        }
        incoming_.push_back(std::move(client));
      }
    } else if (p.fd == outgoing_.get()) {
      char chunk[256];
      const ssize_t n = ::recv(outgoing_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        lost_ = watched_;
        outgoing_.reset();
      }
    } else {
      for (auto it = incoming_.begin(); it != incoming_.end(); ++it) {
        if (it->get() == p.fd) {
          char chunk[256];
          const ssize_t n = ::recv(p.fd, chunk, sizeof chunk, MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            incoming_.erase(it);
          }
          break;
        }
      }
    }
  }
}

}  // namespace zeus::launch::etcd
