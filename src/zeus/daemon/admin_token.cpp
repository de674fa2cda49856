#include "zeus/daemon/admin_token.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/secret_file.h"

namespace zeus::daemon {

std::string load_or_create_admin_token(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    std::array<unsigned char, 32> bytes{};
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      check_posix(n < 0 ? -1 : 0, "getrandom", path.string());
      got += static_cast<size_t>(n);
    }
    std::string hex;
    for (const unsigned char b : bytes) {
      hex += fmt::format("{:02x}", b);
    }
    write_file_atomic(path, hex + "\n", 0600);
    logger().info("zeusd: made the admin token {} (root's only: it ends others' leases)",
                  path.string());
  }
  return read_secret_file(path, "zeusd's admin token");
}

}  // namespace zeus::daemon
