// A TCP peer on loopback that speaks newline-delimited lines by hand: the rendezvous tests' raw
// client (a stranger, a replay, garbage, a flood).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <string>

#include "zeus/common/posix.h"

namespace zeus::test {

class LinePeer {
 public:
  explicit LinePeer(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  bool connected() const { return connected_; }
  bool send(const std::string& text) const {
    return ::send(fd_.get(), text.data(), text.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(text.size());
  }
  // The next line, or "" after `timeout` or at the end of the stream.
  std::string line(std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buffer_.find('\n') == std::string::npos && !eof_ &&
           std::chrono::steady_clock::now() < deadline) {
      read_some();
    }
    const size_t nl = buffer_.find('\n');
    if (nl == std::string::npos) {
      return "";
    }
    std::string out = buffer_.substr(0, nl);
    buffer_.erase(0, nl + 1);
    return out;
  }
  // Whether the other side closed the connection within `timeout` (what it sent is dropped).
  bool closed(std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_ && std::chrono::steady_clock::now() < deadline) {
      read_some();
    }
    return eof_;
  }

 private:
  void read_some() {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char chunk[4096];
      const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n <= 0) {
        eof_ = true;
        return;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  UniqueFd fd_;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
};

}  // namespace zeus::test
