#include "zeus/launch/c10d/line.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>

namespace zeus::launch::c10d {

bool Line::send(const Message& message) {
  const std::string text = channel_.seal(message) + "\n";
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

bool Line::receive(std::vector<std::string>& out, std::string* why) {
  char chunk[4096];
  const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
    return true;
  }
  if (n <= 0) {
    if (why != nullptr) {
      *why = n < 0 ? errno_string(errno) : "";
    }
    return false;
  }
  buffer_.append(chunk, static_cast<size_t>(n));
  for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
    out.push_back(buffer_.substr(0, nl));
    buffer_.erase(0, nl + 1);
  }
  if (buffer_.size() >= kMaxLine) {
    if (why != nullptr) {
      *why = fmt::format("sent a line longer than {} bytes", kMaxLine);
    }
    return false;
  }
  return true;
}

}  // namespace zeus::launch::c10d
