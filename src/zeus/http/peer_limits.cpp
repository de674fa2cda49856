#include "zeus/http/peer_limits.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace zeus::http {

bool PeerLimits::acquire(const std::string& peer) {
  std::lock_guard lock(mu_);
  unsigned& n = held_[peer];
  if (n >= max_per_peer_) {
    if (n == 0) {
      held_.erase(peer);
    }
    return false;
  }
  ++n;
  return true;
}

void PeerLimits::release(const std::string& peer) {
  std::lock_guard lock(mu_);
  const auto it = held_.find(peer);
  if (it != held_.end() && --it->second == 0) {
    held_.erase(it);
  }
}

unsigned PeerLimits::held(const std::string& peer) const {
  std::lock_guard lock(mu_);
  const auto it = held_.find(peer);
  return it == held_.end() ? 0 : it->second;
}

unsigned default_per_peer(unsigned total) {
  return std::max(1U, total / 4);
}

std::string peer_of_socket(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "";
  }
  if (addr.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t cred_len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
      return "";
    }
    return fmt::format("uid {}", cred.uid);
  }
  len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, text,
                sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, text,
                sizeof(text));
  }
  return text;
}

}  // namespace zeus::http
