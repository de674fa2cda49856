#include "zeus/launch/etcd/link.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "zeus/launch/rendezvous_auth.h"
#include "zeus/launch/tcp.h"

namespace zeus::launch::etcd {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

LinkRing::LinkRing(const std::string& host, std::string self_id, std::optional<std::string> token)
    : self_(std::move(self_id)), token_(std::move(token)), listen_(listen_on(host, 0, &port_)) {
  ::fcntl(listen_.get(), F_SETFL, ::fcntl(listen_.get(), F_GETFL) | O_NONBLOCK);
}

std::string LinkRing::greeting_of(const std::string& watcher, const std::string& watched) const {
  const std::string mac =
      token_ ? hmac_hex(*token_, fmt::format("zeus-rdzv-link|{}|{}", watcher, watched)) : "-";
  return fmt::format("zeus-rdzv-link {} {}\n", watcher, mac);
}

bool LinkRing::watch(const std::string& id, const std::string& host, int port) {
  unwatch();
  watched_ = id;
  std::string why;
  UniqueFd fd = connect_to(host, port, kGreeting, &why);
  const std::string hello = greeting_of(self_, id);
  if (fd.get() < 0 || ::send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
                          static_cast<ssize_t>(hello.size())) {
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
  for (const auto& in : incoming_) {
    fds.push_back({in.fd.get(), POLLIN, 0});
  }
}

bool LinkRing::read(Incoming& in) {
  char chunk[256];
  while (true) {
    const ssize_t n = ::recv(in.fd.get(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      return false;  // closed
    }
    if (n < 0) {
      return true;
    }
    if (in.linked) {
      continue;  // nothing more is expected: ignored
    }
    in.greeting.append(chunk, static_cast<size_t>(n));
    const size_t nl = in.greeting.find('\n');
    if (nl == std::string::npos) {
      if (in.greeting.size() > 256) {
        return false;
      }
      continue;
    }
    // "zeus-rdzv-link <id> <mac>": the mac must be the watcher's for this node.
    const std::string line = in.greeting.substr(0, nl + 1);
    const size_t first = line.find(' ');
    const size_t second = first == std::string::npos ? first : line.find(' ', first + 1);
    if (second == std::string::npos) {
      return false;
    }
    const std::string watcher = line.substr(first + 1, second - first - 1);
    const std::string expected = greeting_of(watcher, self_);
    if (!line.starts_with("zeus-rdzv-link ") ||
        !(token_ ? same_mac(line, expected) : line.size() > 16)) {
      return false;
    }
    in.linked = true;
  }
}

void LinkRing::accept() {
  UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (client.get() < 0) {
    return;
  }
  Incoming in{std::move(client), Clock::now(), "", false};
  if (!read(in)) {
    return;  // a greeting already there, and wrong
  }
  const auto count = [&](bool linked) {
    return static_cast<size_t>(std::count_if(
        incoming_.begin(), incoming_.end(), [&](const Incoming& i) { return i.linked == linked; }));
  };
  const size_t limit = in.linked ? kMaxLinks : kMaxPending;
  if (count(in.linked) >= limit) {
    const auto oldest = std::find_if(incoming_.begin(), incoming_.end(),
                                     [&](const Incoming& i) { return i.linked == in.linked; });
    incoming_.erase(oldest);
  }
  incoming_.push_back(std::move(in));
}

void LinkRing::expire() {
  const auto now = Clock::now();
  std::erase_if(incoming_,
                [&](const Incoming& i) { return !i.linked && now - i.accepted > kGreeting; });
}

void LinkRing::handle(const std::vector<pollfd>& fds) {
  for (const pollfd& p : fds) {
    if (p.revents == 0 || p.fd == listen_.get()) {
      continue;
    }
    if (p.fd == outgoing_.get()) {
      char chunk[256];
      const ssize_t n = ::recv(outgoing_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        lost_ = watched_;
        outgoing_.reset();
      }
      continue;
    }
    const auto it = std::find_if(incoming_.begin(), incoming_.end(),
                                 [&](const Incoming& i) { return i.fd.get() == p.fd; });
    if (it != incoming_.end() && !read(*it)) {
      incoming_.erase(it);
    }
  }
  // Greetings before newcomers: a link that already said its greeting is never the oldest
  // pending connection a flood pushes out.
  for (const pollfd& p : fds) {
    if (p.fd == listen_.get() && p.revents != 0) {
      for (int i = 0; i < 64; ++i) {
        const size_t before = incoming_.size();
        accept();
        if (incoming_.size() == before && errno == EAGAIN) {
          break;
        }
      }
    }
  }
  expire();
}

}  // namespace zeus::launch::etcd
