// The rendezvous backends' TCP plumbing: listening and connecting by host name or address (IPv4
// or IPv6), with errors that name the address and what to do.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

#include "zeus/common/posix.h"

namespace zeus::launch {

// A listening socket on `addr` (empty: every address) and `port` (0: a free one); the port it
// got in *bound_port. Throws ConfigError when `addr` does not resolve, IoError naming the
// address, the port and its holder when it cannot bind.
UniqueFd listen_on(const std::string& addr, int port, int* bound_port);

// One attempt of at most `timeout`; a blocking socket with TCP_NODELAY, or -1 (and *error set
// to why) when none of the host's addresses accepted. Throws ConfigError when `host` does not
// resolve.
UniqueFd connect_to(const std::string& host, int port, std::chrono::milliseconds timeout,
                    std::string* error);

// "address:port" ("[address]:port" for IPv6) of a peer.
std::string address_of(const sockaddr_storage& ss);
// Whether the socket is bound to a loopback address (127.0.0.0/8 or ::1).
bool bound_to_loopback(int fd);

}  // namespace zeus::launch
