// A node's launcher's side of the c10d rendezvous: joins the serving launcher (c10d/server.h)
// over TCP, sends heartbeats from a thread of its own, and reads the rounds and notices.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "zeus/launch/rendezvous.h"

namespace zeus::launch::c10d {

// Contract: one per node launcher, used from one thread (its heartbeats run on their own).
class Client {
 public:
  Client(std::string endpoint_host, int endpoint_port, RendezvousOptions options,
         RendezvousNode node);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // As Rendezvous::join(): connects (waiting while nothing listens, up to join_timeout), says
  // hello, joins the next round and waits until it closes.
  RendezvousRound join();
  std::optional<RendezvousNotice> wait_notice(std::chrono::milliseconds timeout);
  void report_failure(const std::string& why);
  void report_done();
  // The connection to the endpoint (readable: a notice may have come), -1 before join().
  int fd() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::launch::c10d
