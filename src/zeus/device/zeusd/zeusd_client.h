// A client of the node daemon (zeusd, Zeus 0.16's wire API): how a job that is not root sets GPU
// limits. Over libcurl, on the Unix socket (ZEUSD_SOCK_PATH) or TCP (ZEUSD_HOST_PORT with
// ZEUSD_TOKEN), as upstream's Python client chooses, over the one HTTP client (bounded replies).
// One connection is kept and reused.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::http_client {
class Client;
}  // namespace zeus::http_client

namespace zeus::device::zeusd {

struct ZeusdEndpoint {
  std::string socket_path;  // set: the Unix socket
  std::string host_port;    // else: "host:port"
  std::string token;        // sent as "Authorization: Bearer <token>" when not empty
  // zeusd's administrator credential (the contents of its admin token file, docs/zeusd.md),
  // sent as "X-Zeusd-Admin-Token" when not empty: changes then persist and end leases, and job
  // energy records may be started and stopped. Never taken from a job's environment.
  std::string admin_token;

  // ZEUSD_SOCK_PATH, else ZEUSD_HOST_PORT (with ZEUSD_TOKEN), else std::nullopt.
  static std::optional<ZeusdEndpoint> from_env();
  std::string describe() const;  // "zeusd at /run/zeusd/zeusd.sock"
};

struct ZeusdReply {
  long status = 0;
  std::string body;
};

// One GPU as the daemon lists it (GET /discover). `uuid` is zeus-cpp's addition (empty from
// upstream's zeusd); `pci_address` is upstream HEAD's (empty from its tagged releases).
struct DaemonGpu {
  int id = 0;  // the daemon's GPU id: what the wire's gpu_ids name
  std::string name;
  std::string uuid;
  std::string pci_address;
};

class ZeusdClient {
 public:
  explicit ZeusdClient(ZeusdEndpoint endpoint);
  ~ZeusdClient();
  ZeusdClient(const ZeusdClient&) = delete;
  ZeusdClient& operator=(const ZeusdClient&) = delete;

  // One request; `target` is the path with its query ("/gpu/get_power_limit?gpu_ids=0").
  // Throws IoError naming the endpoint when it cannot be reached (daemon not running, socket
  // permissions).
  ZeusdReply request(std::string_view method, std::string_view target);

  // The daemon's GPUs (GET /discover). Throws IoError when it cannot be reached or answers
  // with anything but 200 and a GPU list.
  std::vector<DaemonGpu> discover_gpus();

  // POST /gpu/set_power_limit for one GPU id (its machine index), blocking. Non-200 replies throw
  // the error the status means (403 PermissionError, 409 PermissionError naming the holder, 400
  // ConfigError, 401 PermissionError about the token, otherwise DeviceError), with the daemon's
  // message.
  void set_power_limit_mw(int gpu_id, int64_t limit_mw);
  // Any other GPU write of Zeus 0.16's API (`route` such as "set_persistence_mode", `params`
  // its extra query parameters, "enabled=true"), blocking, with the same errors; `what` names
  // the change for messages ("persistence mode on").
  void gpu_command(int gpu_id, std::string_view route, std::string_view params,
                   std::string_view what);

  const ZeusdEndpoint& endpoint() const { return endpoint_; }

 private:
  ZeusdEndpoint endpoint_;
  std::unique_ptr<http_client::Client> http_;  // one connection, reused
};

}  // namespace zeus::device::zeusd
