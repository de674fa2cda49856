// zeusd's administrator credential. Being root on the socket is not being an administrator: a
// training pod runs as root by default and must be leased like everyone (Note [leases] in
// leases.h). An administrator is whoever can read this token's file, which zeusd makes in its
// state directory (0600, the daemon's user: root on the host, never mounted into a pod) and
// which the client sends as `X-Zeusd-Admin-Token` (`zeus job-energy --admin-token-file`, the
// Slurm prolog and epilog). With it a change persists and ends any lease on that setting, and
// job-energy records may be started and stopped.
#pragma once

#include <filesystem>
#include <string>

namespace zeus::daemon {

// The token at `path`: read (it must be readable by its owner only and not empty), or made when
// missing (32 random bytes as 64 hex digits, written atomically, mode 0600). Throws ConfigError
// naming the file when it is readable by others or empty, IoError when it cannot be written.
std::string load_or_create_admin_token(const std::filesystem::path& path);

}  // namespace zeus::daemon
