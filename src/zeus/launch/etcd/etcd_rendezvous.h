// --rdzv-backend etcd as a Rendezvous: the run's state and the nodes' records in etcd (Note [etcd
// rendezvous keys] in etcd/records.h), the decisions of etcd/round_logic.h, the liveness ring of
// etcd/link.h. No launcher is special: any node may die, the first included, and the others go
// on; etcd losing a minority of its members changes nothing (the gateway fails over).
//
// One agent thread per launcher does everything that talks to etcd: it keeps the node's lease
// alive (TTL = read_timeout, refreshed every heartbeat), mirrors the run's keys (a range read,
// then a watch from the next revision: changes are seen, not polled for), decides, and writes.
// The launcher's thread only asks (join, report_*) and waits for answers.
//
// etcd unreachable: before its first answer, the agent waits up to join_timeout (saying so every
// 10 s); after it, an etcd that answers nothing for read_timeout (the node's lease is gone by
// then anyway) ends the run on this node: join() throws and wait_notice() is an abort, naming
// the endpoints, so that the workers are stopped and their limits restored.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zeus/launch/rendezvous.h"

namespace zeus::launch::etcd {

struct EtcdRendezvousOptions {
  RendezvousOptions rendezvous;  // .etcd says where etcd is
  RendezvousNode node;
  std::function<void(const std::string&)> say;  // what the run's launcher prints
};

class EtcdRendezvous final : public Rendezvous {
 public:
  // Throws ConfigError for no endpoint or a build without libcurl; IoError when the liveness
  // port cannot be opened on the node's address.
  explicit EtcdRendezvous(EtcdRendezvousOptions options);
  // Ends the node's lease (its record goes with it) when etcd answers.
  ~EtcdRendezvous() override;

  RendezvousRound join() override;
  std::optional<RendezvousNotice> wait_notice(std::chrono::milliseconds timeout) override;
  void report_failure(const std::string& why) override;
  // Returns once the state in etcd says this node is done (or throws DistError when etcd did
  // not take it within read_timeout): its record may go after that without ending the round.
  void report_done() override;
  bool wait_finished(std::chrono::milliseconds) override { return true; }
  int fd() const override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::launch::etcd
