#include "zeus/launch/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <cerrno>

#include "zeus/common/errors.h"
#include "zeus/launch/ports.h"

namespace zeus::launch {
namespace {

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

}  // namespace

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

UniqueFd connect_to(const std::string& host, int port, std::chrono::milliseconds timeout,
                    std::string* error) {
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

std::string address_of(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    return fmt::format("{}:{}", text, ntohs(a->sin_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
  ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  return fmt::format("[{}]:{}", text, ntohs(a->sin6_port));
}

bool bound_to_loopback(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return false;
  }
  if (ss.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  return IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr) ||
         (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) && a6->sin6_addr.s6_addr[12] == 127);
}

}  // namespace zeus::launch
