// --rdzv-backend c10d as a Rendezvous: the launcher whose host is the endpoint's serves it
// (unless another launcher on this host already does: several nodes on one machine), and every
// launcher, the serving one included, joins it as a client.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zeus/launch/c10d/client.h"
#include "zeus/launch/c10d/server.h"
#include "zeus/launch/rendezvous.h"

namespace zeus::launch::c10d {

struct C10dOptions {
  std::string endpoint_host;
  int endpoint_port = 29400;
  bool serve = false;  // the endpoint is this host
  RendezvousOptions rendezvous;
  RendezvousNode node;
  std::function<void(const std::string&)> say;  // "serving rendezvous ..."
};

class C10dRendezvous final : public Rendezvous {
 public:
  explicit C10dRendezvous(C10dOptions options);

  RendezvousRound join() override { return client_.join(); }
  std::optional<RendezvousNotice> wait_notice(std::chrono::milliseconds timeout) override {
    return client_.wait_notice(timeout);
  }
  void report_failure(const std::string& why) override { client_.report_failure(why); }
  void report_done() override { client_.report_done(); }
  bool wait_finished(std::chrono::milliseconds timeout) override {
    return !server_ || server_->wait_finished(timeout);
  }
  int fd() const override { return client_.fd(); }

 private:
  std::unique_ptr<Server> server_;  // declared first: up before the client joins it
  Client client_;
};

}  // namespace zeus::launch::c10d
