// Where this build of zeus-cpp has no libcurl: the etcd rendezvous cannot be used, and saying so
// is the only answer.
#include "zeus/common/errors.h"
#include "zeus/launch/etcd/gateway.h"

namespace zeus::launch::etcd {

class Gateway::Impl {};

Gateway::Gateway(GatewayOptions) {
  throw ConfigError(
      "--rdzv-backend etcd needs libcurl, which this build of zeus-cpp lacks: rebuild with "
      "libcurl4-openssl-dev (ZEUS_WITH_ZEUSD_CLIENT=ON), or use --rdzv-backend c10d");
}
Gateway::~Gateway() = default;
RangeResult Gateway::range(const std::string&, const std::string&) {
  return {};
}
TxnResult Gateway::txn(const std::vector<Compare>&, const std::vector<Op>&,
                       const std::vector<Op>&) {
  return {};
}
Gateway::Lease Gateway::grant(std::chrono::seconds) {
  return {};
}
std::optional<std::chrono::seconds> Gateway::keep_alive(int64_t) {
  return std::nullopt;
}
std::optional<std::chrono::seconds> Gateway::time_to_live(int64_t) {
  return std::nullopt;
}
void Gateway::revoke(int64_t) {}
std::string Gateway::endpoints_text() const {
  return {};
}
uint64_t Gateway::endpoint_epoch() const {
  return 0;
}
std::chrono::steady_clock::time_point Gateway::last_answer() const {
  return {};
}
bool Gateway::ever_answered() const {
  return false;
}
std::unique_ptr<Gateway::Watch> Gateway::watch(const std::string&, const std::string&, int64_t,
                                               OnEvents, std::function<void()>) {
  return nullptr;
}

}  // namespace zeus::launch::etcd
