#include "zeus/launch/ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"

namespace zeus::launch {
namespace {

// Binds a TCP socket to addr:port; returns the socket (or -1 with errno set).
int bind_tcp(const std::string& addr, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &result); rc != 0) {
    throw ConfigError(
        fmt::format("cannot resolve master address '{}': {}", addr, ::gai_strerror(rc)));
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // As TCPStore does: a port in TIME_WAIT from a previous run is not "in use".
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      if (bound_port != nullptr) {
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
        *bound_port =
            ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
      }
      break;
    }
    err = errno;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(result);
  errno = err;
  return fd;
}

// The inode of the socket listening on `port`, from /proc/net/tcp{,6} (hex local port).
std::optional<std::string> listening_inode(int port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
          inode;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") {  // 0A: LISTEN
        continue;
      }
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) == port) {
        return inode;
      }
    }
  }
  return std::nullopt;
}

// " by pid N (comm)" for the process holding socket `inode`, when /proc lets us see it.
std::string holder_of(const std::string& inode) {
  const std::string target = "socket:[" + inode + "]";
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::error_code fd_ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (std::filesystem::read_symlink(fd.path(), link_ec).string() == target) {
        std::ifstream comm(proc.path() / "comm");
        std::string name;
        std::getline(comm, name);
        return fmt::format(" by pid {} ({})", pid, name);
      }
    }
  }
  return "";
}

}  // namespace

int pick_free_port(const std::string& addr) {
  int port = 0;
  const UniqueFd fd(bind_tcp(addr, 0, &port));
  if (fd.get() < 0) {
    throw_posix_error("bind to a free port", addr, errno);
  }
  return port;
}

std::optional<std::string> port_in_use(const std::string& addr, int port) {
  const UniqueFd fd(bind_tcp(addr, port, nullptr));
  if (fd.get() >= 0) {
    return std::nullopt;
  }
  if (errno == EADDRNOTAVAIL) {
    return fmt::format(
        "{} is not an address of this machine ({}); node 0 must run on the "
        "master address",
        addr, host_name());
  }
  if (errno != EADDRINUSE) {
    return fmt::format("binding it failed: {}", errno_string(errno));
  }
  const auto inode = listening_inode(port);
  return "it is already in use" + (inode ? holder_of(*inode) : std::string());
}

}  // namespace zeus::launch
