// The c10d rendezvous on loopback: rounds of MIN..MAX nodes, node ranks, a node that leaves or
// goes silent, a newcomer, failures against --max-restarts, join_timeout, a foreign run id.
#include "zeus/launch/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/line_peer.h"
#include "support/rendezvous_support.h"
#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/launch/c10d/client.h"
#include "zeus/launch/c10d/protocol.h"
#include "zeus/launch/c10d/server.h"
#include "zeus/launch/elastic.h"

namespace zeus::launch {
namespace {

using c10d::Client;
using c10d::Server;

using namespace std::chrono_literals;
using ::testing::HasSubstr;

RendezvousOptions quick(int min_nodes, int max_nodes) {
  RendezvousOptions o;
  o.run_id = "job7";
  o.min_nodes = min_nodes;
  o.max_nodes = max_nodes;
  o.last_call = 300ms;
  o.join_timeout = 20s;
  o.heartbeat = 50ms;
  o.keep_alive = 1s;
  return o;
}

struct Cluster {
  explicit Cluster(RendezvousOptions o) : options(o), server("127.0.0.1", 0, o) {}
  std::unique_ptr<Client> node(int nproc = 2) {
    return std::make_unique<Client>("127.0.0.1", server.port(), options,
                                    RendezvousNode{"127.0.0.1", nproc});
  }
  RendezvousOptions options;
  Server server;
};

using test::expect_one_world;
using test::join_all;

TEST(Rendezvous, MaxNodesCloseTheRoundAtOnce) {
  Cluster c(quick(2, 3));
  c.options.last_call = 60s;  // only MAX can close it in time
  auto a = c.node(), b = c.node(), d = c.node();
  expect_one_world(join_all({a.get(), b.get(), d.get()}), 0, 2);
}

TEST(Rendezvous, MinNodesCloseItAfterTheLastCall) {
  Cluster c(quick(2, 3));
  auto a = c.node(), b = c.node();
  const auto start = std::chrono::steady_clock::now();
  expect_one_world(join_all({a.get(), b.get()}), 0, 2);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(Rendezvous, ALeavingNodeRestartsTheOthersInASmallerWorld) {
  Cluster c(quick(2, 3));
  auto a = c.node(), b = c.node(), d = c.node();
  join_all({a.get(), b.get(), d.get()});
  d.reset();  // its launcher is gone: the connection closes
  ASSERT_NO_FATAL_FAILURE(
      test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart, {"left"}, 5s));
  expect_one_world(join_all({a.get(), b.get()}), 1, 2);
}

TEST(Rendezvous, ANewcomerGrowsTheWorldBack) {
  Cluster c(quick(2, 3));
  auto a = c.node(), b = c.node();
  join_all({a.get(), b.get()});
  EXPECT_FALSE(a->wait_notice(100ms).has_value()) << "the round runs";
  auto newcomer = c.node();
  auto late = std::async(std::launch::async, [&] { return newcomer->join(); });
  ASSERT_NO_FATAL_FAILURE(
      test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart, {"joined"}, 5s));
  auto rounds = join_all({a.get(), b.get()});
  rounds.push_back(late.get());
  expect_one_world(rounds, 1, 2);
}

using RawPeer = test::LinePeer;

const std::string kHello = R"({"v":2,"op":"hello","run_id":"job7","nonce":"n","auth":false})";
const std::string kHelloAndJoin = kHello +
                                  "\n"
                                  R"({"v":2,"op":"join","host":"127.0.0.1","nproc":2})"
                                  "\n";

TEST(Rendezvous, ASilentNodeIsDroppedAfterTheKeepAlive) {
  Cluster c(quick(2, 3));
  auto a = c.node(), b = c.node();
  auto joins = std::async(std::launch::async, [&] { return join_all({a.get(), b.get()}); });
  std::this_thread::sleep_for(150ms);  // a and b wait; the third node fills the round
  // A node that joins and then never sends a heartbeat (a machine that lost its network).
  RawPeer silent(c.server.port());
  ASSERT_TRUE(silent.connected() && silent.send(kHelloAndJoin));
  const auto rounds = joins.get();
  EXPECT_EQ(rounds[0].nnodes, 3);
  const auto notice = a->wait_notice(5s);
  ASSERT_TRUE(notice.has_value());
  EXPECT_THAT(notice->reason, HasSubstr("sent no heartbeat for 1.0 s"));
  ASSERT_TRUE(b->wait_notice(5s).has_value());
  expect_one_world(join_all({a.get(), b.get()}), 1, 2);
}

// The workers' master port is chosen by node 0 when the round closes (it answers the server's
// port request), not when it joined: a port taken in between no longer breaks the round.
TEST(Rendezvous, TheMasterPortIsPickedByNodeZeroWhenTheRoundCloses) {
  Cluster c(quick(2, 2));
  RawPeer first(c.server.port());
  ASSERT_TRUE(first.connected() && first.send(kHelloAndJoin));
  EXPECT_THAT(first.line(2s), HasSubstr(R"("op":"welcome")"));
  EXPECT_THAT(first.line(2s), HasSubstr(R"("op":"waiting")"));
  auto b = c.node();
  auto joined = std::async(std::launch::async, [&] { return b->join(); });
  std::string request;
  while (request.empty()) {
    const std::string l = first.line(5s);
    if (l.empty()) {
      break;
    }
    if (l.find("port_request") != std::string::npos) {
      request = l;
    }
  }
  ASSERT_THAT(request, HasSubstr(R"("round":0)")) << "node 0 is asked for the port at close";
  ASSERT_TRUE(first.send(R"({"v":2,"op":"port_reply","round":0,"port":31337})"
                         "\n"));
  const RendezvousRound r = joined.get();
  EXPECT_EQ(r.master_port, 31337);
  EXPECT_EQ(r.node_rank, 1);
  EXPECT_THAT(first.line(2s), HasSubstr(R"("master_port":31337)"));
}

// Something else holds the endpoint (a web server, a typo'd port): the node says so within
// seconds instead of waiting the whole join_timeout.
TEST(Rendezvous, AnEndpointThatIsNotARendezvousIsAnErrorAtOnce) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  auto o = quick(1, 1);
  o.join_timeout = 60s;
  Client a("127.0.0.1", ntohs(addr.sin_port), o, {"127.0.0.1", 1});
  const auto start = std::chrono::steady_clock::now();
  try {
    a.join();
    FAIL() << "joined a program that is not a rendezvous";
  } catch (const TimeoutError& e) {
    FAIL() << "waited for the join timeout: " << e.what();
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("did not answer as a zeus rendezvous"));
    EXPECT_THAT(e.what(), HasSubstr("--rdzv-endpoint"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

// A message with a missing field is refused by name, not read as a default (nproc 1 before).
TEST(Rendezvous, AMessageMissingAFieldIsRefusedNotDefaulted) {
  Cluster c(quick(1, 2));
  RawPeer p(c.server.port());
  ASSERT_TRUE(p.connected() && p.send(kHello + "\n"
                                               R"({"v":2,"op":"join","host":"127.0.0.1"})"
                                               "\n"));
  EXPECT_THAT(p.line(2s), HasSubstr("welcome"));
  EXPECT_EQ(p.line(2s), "") << "the server closes the connection instead of a round of nproc 1";
  EXPECT_THROW(c10d::decode(R"({"v":2,"op":"join","host":"h"})"), DistError);
  try {
    c10d::decode(R"({"v":1,"op":"join","host":"h","nproc":1})");
    FAIL();
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("version 1 where 2 is spoken"));
  }
}

TEST(Rendezvous, FailuresCountAgainstMaxRestartsThenTheRunIsAborted) {
  auto o = quick(2, 2);
  o.max_restarts = 1;
  Cluster c(o);
  auto a = c.node(), b = c.node();
  join_all({a.get(), b.get()});
  a->report_failure("worker 1 exited with code 1");
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart,
                                               {"worker 1 exited with code 1"}, 5s));
  const auto again = join_all({a.get(), b.get()});
  EXPECT_EQ(again[0].round, 1);
  b->report_failure("worker 3 killed by SIGSEGV");
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kAbort,
                                               {"exceed --max-restarts 1"}, 5s));
  EXPECT_THROW(a->join(), DistError);
}

TEST(Rendezvous, AloneBelowMinGivesUpAfterTheJoinTimeout) {
  auto o = quick(2, 3);
  o.join_timeout = 400ms;
  Cluster c(o);
  auto a = c.node();
  try {
    a->join();
    FAIL() << "joined alone";
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 node(s) joined, at least 2 needed"));
    EXPECT_THAT(e.what(), HasSubstr("join_timeout 0.4 s"));
    EXPECT_THAT(e.what(), HasSubstr("--rdzv-id"));
  }
}

TEST(Rendezvous, NothingListeningIsSaidAfterTheJoinTimeout) {
  auto o = quick(1, 1);
  o.join_timeout = 200ms;
  int port = 0;
  {
    Server probe("127.0.0.1", 0, o);
    port = probe.port();
  }
  Client a("127.0.0.1", port, o, {"127.0.0.1", 1});
  EXPECT_THROW(
      {
        try {
          a.join();
        } catch (const TimeoutError& e) {
          EXPECT_THAT(e.what(), HasSubstr("nothing listens on 127.0.0.1:"));
          throw;
        }
      },
      TimeoutError);
}

TEST(Rendezvous, ANodeOfAnotherRunIsRefused) {
  Cluster c(quick(1, 2));
  auto other = c.options;
  other.run_id = "job8";
  Client stranger("127.0.0.1", c.server.port(), other, {"127.0.0.1", 1});
  try {
    stranger.join();
    FAIL() << "joined another run";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("serves rendezvous id 'job7', not 'job8'"));
  }
}

TEST(Rendezvous, BadSizesAndABusyPortAreRefused) {
  EXPECT_THROW(Server("127.0.0.1", 0, quick(3, 2)), ConfigError);
  Cluster c(quick(1, 1));
  try {
    Server second("127.0.0.1", c.server.port(), quick(1, 1));
    FAIL() << "two servers on one port";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(c.server.port())));
  }
}

TEST(RdzvConf, TorchrunsKeysInSeconds) {
  RendezvousOptions o;
  apply_rdzv_conf("join_timeout=12.5,last_call_timeout=3,read_timeout=8", o);
  EXPECT_EQ(o.join_timeout, 12500ms);
  EXPECT_EQ(o.last_call, 3000ms);
  EXPECT_EQ(o.keep_alive, 8000ms);
  EXPECT_LE(o.heartbeat, 2000ms) << "several heartbeats within the silence that drops a node";
  apply_rdzv_conf("read_timeout=0.2", o);
  EXPECT_EQ(o.heartbeat, 50ms);
}

TEST(RdzvConf, UnknownKeysAndBadValuesNameWhatIsSupported) {
  RendezvousOptions o;
  try {
    apply_rdzv_conf("timeout=3", o);
    FAIL() << "accepted an unknown key";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'timeout'"));
    EXPECT_THAT(e.what(), HasSubstr("join_timeout, last_call_timeout and read_timeout"));
  }
  for (const char* bad : {"join_timeout=abc", "join_timeout=0", "last_call_timeout"}) {
    EXPECT_THROW(apply_rdzv_conf(bad, o), ConfigError) << bad;
  }
}

TEST(RdzvConf, EtcdsKeysAndTheTokenFile) {
  RendezvousOptions o;
  apply_rdzv_conf("protocol=https,cacert=/ca.pem,cert=/c.pem,key=/c.key,timeout=7", o,
                  /*etcd=*/true);
  EXPECT_EQ(o.etcd.protocol, "https");
  EXPECT_EQ(o.etcd.cacert, "/ca.pem");
  EXPECT_EQ(o.etcd.cert, "/c.pem");
  EXPECT_EQ(o.etcd.key, "/c.key");
  EXPECT_EQ(o.join_timeout, 7s) << "torchrun's etcd timeout";
  EXPECT_THROW(apply_rdzv_conf("cacert=/ca.pem", o), ConfigError) << "an etcd key for c10d";
  test::TempDir dir;
  const auto token = dir.path() / "token";
  std::ofstream(token) << "  s3cret \n";
  ::chmod(token.c_str(), 0644);
  try {
    RendezvousOptions t;
    apply_rdzv_conf("token_file=" + token.string(), t);
    FAIL() << "a token others can read";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("chmod 600"));
    EXPECT_THAT(e.what(), HasSubstr(token.string()));
  }
  ::chmod(token.c_str(), 0600);
  RendezvousOptions t;
  apply_rdzv_conf("token_file=" + token.string(), t);
  EXPECT_EQ(t.token, "s3cret");
  {
    test::ScopedEnv env("ZEUS_RDZV_TOKEN_FILE", token.string());
    RendezvousOptions from_env;
    apply_rdzv_conf("", from_env);
    EXPECT_EQ(from_env.token, "s3cret");
  }
  RendezvousOptions u;
  EXPECT_THROW(apply_rdzv_conf("user=zeus", u, true), ConfigError) << "no password file";
  EXPECT_THROW(apply_rdzv_conf("protocol=http,cacert=/ca.pem", u, true), ConfigError)
      << "TLS files without https";
  EXPECT_THROW(apply_rdzv_conf("protocol=ftp", u, true), ConfigError);
}

TEST(RdzvEndpoints, EtcdsListWithItsDefaultPort) {
  EXPECT_EQ(parse_etcd_endpoints("a,b:1,[::1]:3,[::1]"),
            (std::vector<std::string>{"a:2379", "b:1", "[::1]:3", "[::1]:2379"}));
  for (const char* bad : {"", ",", "a:0", "a:x", "[::1", "http://a:2379"}) {
    EXPECT_THROW(parse_etcd_endpoints(bad), ConfigError) << bad;
  }
}

TEST(ApplyRound, GivesTheWorkersTheRoundsRanksWorldAndMaster) {
  LaunchPlan plan;
  for (int local = 0; local < 2; ++local) {
    WorkerSpec w;
    w.local_rank = local;
    w.rank = local;
    w.world.local_rank = local;
    w.world.local_world_size = 2;
    w.world.role_name = "trainer";
    w.env = {{"OMP_NUM_THREADS", "3"}};
    plan.workers.push_back(w);
  }
  const RendezvousRound round{.round = 1,
                              .node_rank = 1,
                              .nnodes = 3,
                              .world_size = 6,
                              .first_rank = 2,
                              .master_addr = "10.0.0.1",
                              .master_port = 29400};
  apply_round(plan, round);
  EXPECT_EQ(plan.node_rank, 1);
  EXPECT_EQ(plan.nnodes, 3);
  EXPECT_EQ(plan.world_size, 6);
  EXPECT_EQ(plan.master_addr, "10.0.0.1");
  for (int local = 0; local < 2; ++local) {
    const auto& w = plan.workers[static_cast<size_t>(local)];
    EXPECT_EQ(w.rank, 2 + local);
    EXPECT_EQ(w.env.at("RANK"), std::to_string(2 + local));
    EXPECT_EQ(w.env.at("ROLE_RANK"), std::to_string(2 + local));
    EXPECT_EQ(w.env.at("LOCAL_RANK"), std::to_string(local));
    EXPECT_EQ(w.env.at("WORLD_SIZE"), "6");
    EXPECT_EQ(w.env.at("ROLE_WORLD_SIZE"), "6");
    EXPECT_EQ(w.env.at("GROUP_RANK"), "1");
    EXPECT_EQ(w.env.at("GROUP_WORLD_SIZE"), "3");
    EXPECT_EQ(w.env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(w.env.at("MASTER_PORT"), "29400");
    EXPECT_EQ(w.env.at("ROLE_NAME"), "trainer");
    EXPECT_EQ(w.env.at("OMP_NUM_THREADS"), "3") << "the worker's other variables stay";
  }
  RendezvousRound too_small = round;
  too_small.world_size = 3;
  EXPECT_THROW(apply_round(plan, too_small), InternalError);
}

}  // namespace
}  // namespace zeus::launch
