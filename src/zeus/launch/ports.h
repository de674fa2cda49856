// The launcher's probes of the machine: TCP ports (free? who holds it?) and programs in PATH.
#pragma once

#include <optional>
#include <string>

namespace zeus::launch {

// A port the kernel reports free on `addr` right now (bind to port 0). Throws IoError.
int pick_free_port(const std::string& addr);

// std::nullopt when `port` can be bound on `addr` (numeric IPv4/IPv6 or a host name); otherwise
// why not, e.g. "it is already in use by pid 1234 (python3)". Throws ConfigError when `addr`
// does not resolve.
std::optional<std::string> port_in_use(const std::string& addr, int port);

}  // namespace zeus::launch
