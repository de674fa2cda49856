// A c10d rendezvous connection: one message per line (c10d/protocol.h), signed and checked by its
// channel (c10d/channel.h). Contract: one thread at a time (the client locks around sends).
#pragma once

#include <string>
#include <vector>

#include "zeus/common/posix.h"
#include "zeus/launch/c10d/channel.h"

namespace zeus::launch::c10d {

class Line {
 public:
  // Longer lines than this end the connection: no message of the protocol comes near it.
  static constexpr size_t kMaxLine = 1 << 16;

  Line(UniqueFd fd, Channel channel, std::string peer = {})
      : fd_(std::move(fd)), channel_(std::move(channel)), peer_(std::move(peer)) {}
  int fd() const { return fd_.get(); }
  Channel& channel() { return channel_; }
  const std::string& peer() const { return peer_; }  // "address:port", for the server's log

  // Sends one message; false when the peer is gone (the caller drops it).
  bool send(const Message& message);
  // Reads what is available (the fd polled readable) and appends complete lines to `out`;
  // false at end of stream or on an error (*why: what ended it, "" for a plain close), or past
  // kMaxLine bytes without a newline.
  bool receive(std::vector<std::string>& out, std::string* why = nullptr);

 private:
  UniqueFd fd_;
  Channel channel_;
  std::string peer_;
  std::string buffer_;
};

}  // namespace zeus::launch::c10d
