// The etcd rendezvous against a real etcd (Debian's etcd-server 3.4, started by the fixture on
// loopback): the gateway's calls and failover, then nodes as objects of this process forming
// rounds, losing and gaining nodes, counting failures, refusing strangers and repairing what
// they wrote, and giving up when etcd is gone.
#include "zeus/launch/etcd/etcd_rendezvous.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "support/etcd_cluster.h"
#include "support/rendezvous_support.h"
#include "zeus/common/errors.h"
#include "zeus/launch/etcd/gateway.h"
#include "zeus/launch/etcd/records.h"
#include "zeus/launch/tcp.h"

namespace zeus::launch::etcd {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

RendezvousOptions quick_at(std::vector<std::string> endpoints, int min_nodes, int max_nodes) {
  RendezvousOptions o;
  o.run_id = "job7";
  o.min_nodes = min_nodes;
  o.max_nodes = max_nodes;
  o.last_call = 300ms;
  o.join_timeout = 20s;
  o.heartbeat = 250ms;
  o.keep_alive = 2s;
  o.max_restarts = 1;
  o.etcd.endpoints = std::move(endpoints);
  return o;
}

RendezvousOptions quick(const test::EtcdCluster& etcd, int min_nodes, int max_nodes) {
  std::vector<std::string> endpoints;
  for (int i = 0; i < etcd.size(); ++i) {
    endpoints.push_back(etcd.endpoint(i));
  }
  return quick_at(std::move(endpoints), min_nodes, max_nodes);
}

std::unique_ptr<EtcdRendezvous> node(const RendezvousOptions& o, int nproc = 2) {
  return std::make_unique<EtcdRendezvous>(
      EtcdRendezvousOptions{o, RendezvousNode{"127.0.0.1", nproc}, nullptr});
}

using test::expect_one_world;
using test::join_all;

// The run's state in etcd as a node with `token` reads it (absent, or what is wrong with it).
Decoded<RunState> state_in(Gateway& gw, const Keys& keys, const std::optional<std::string>& token) {
  const RangeResult r = gw.range(keys.state());
  if (r.kvs.empty()) {
    return {RecordStatus::kMalformed, std::nullopt, "no state"};
  }
  return decode_state(r.kvs[0].value, keys.state(), token);
}

Gateway gateway_of(const test::EtcdCluster& etcd) {
  GatewayOptions g;
  for (int i = 0; i < etcd.size(); ++i) {
    g.etcd.endpoints.push_back(etcd.endpoint(i));
  }
  g.request_timeout = 1s;
  return Gateway(g);
}

TEST(EtcdGateway, KeysTransactionsLeasesAndAWatch) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  Gateway gw = gateway_of(etcd);
  const std::string prefix = "/t/";
  std::vector<WatchEvent> seen;
  std::mutex mu;
  const RangeResult empty = gw.range(prefix, prefix_end(prefix));
  EXPECT_TRUE(empty.kvs.empty());
  auto watch = gw.watch(
      prefix, prefix_end(prefix), empty.revision + 1,
      [&](const std::vector<WatchEvent>& events, int64_t) {
        std::lock_guard lock(mu);
        seen.insert(seen.end(), events.begin(), events.end());
      },
      nullptr);
  // A compare-and-swap: created once, refused the second time.
  const std::vector<Compare> absent{{Compare::Target::kCreate, "/t/a", "", 0}};
  const TxnResult created =
      gw.txn(absent, {{Op::Kind::kPut, "/t/a", std::string("v\0w", 3), 0, ""}},
             {{Op::Kind::kRange, "/t/a", "", 0, ""}});
  EXPECT_TRUE(created.succeeded);
  const TxnResult again = gw.txn(absent, {{Op::Kind::kPut, "/t/a", "x", 0, ""}},
                                 {{Op::Kind::kRange, "/t/a", "", 0, ""}});
  EXPECT_FALSE(again.succeeded);
  ASSERT_EQ(again.ranges.size(), 1u);
  ASSERT_EQ(again.ranges[0].kvs.size(), 1u);
  EXPECT_EQ(again.ranges[0].kvs[0].value, std::string("v\0w", 3)) << "bytes, not text";
  // A lease: its key goes when it is revoked.
  const Gateway::Lease lease = gw.grant(5s);
  EXPECT_GE(lease.ttl, 5s);
  gw.txn({}, {{Op::Kind::kPut, "/t/leased", "1", lease.id, ""}}, {});
  EXPECT_TRUE(gw.keep_alive(lease.id));
  EXPECT_TRUE(gw.time_to_live(lease.id));
  gw.revoke(lease.id);
  EXPECT_NO_THROW(gw.revoke(lease.id)) << "a lease already gone is no error";
  EXPECT_FALSE(gw.keep_alive(lease.id));
  EXPECT_FALSE(gw.time_to_live(lease.id));
  EXPECT_TRUE(test::eventually(
      [&] {
        std::lock_guard lock(mu);
        return seen.size() >= 3;
      },
      10s));
  std::lock_guard lock(mu);
  EXPECT_EQ(seen[0].kv.key, "/t/a");
  EXPECT_FALSE(seen[0].deleted);
  EXPECT_EQ(seen[1].kv.key, "/t/leased");
  EXPECT_TRUE(seen[2].deleted) << "the lease's key, deleted with it";
  EXPECT_FALSE(watch->ended());
}

TEST(EtcdGateway, ACallMovesToTheNextMemberWhenOneIsGone) {
  test::EtcdCluster etcd({.members = 3});
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  Gateway gw = gateway_of(etcd);
  gw.txn({}, {{Op::Kind::kPut, "/f/x", "1", 0, ""}}, {});
  const uint64_t epoch = gw.endpoint_epoch();
  etcd.kill(0);  // the member the gateway uses
  const RangeResult r = gw.range("/f/x");
  ASSERT_EQ(r.kvs.size(), 1u);
  EXPECT_GT(gw.endpoint_epoch(), epoch);
  etcd.kill(1);
  etcd.kill(2);
  try {
    gw.range("/f/x");
    FAIL() << "an answer from a dead cluster";
  } catch (const EtcdUnavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr(etcd.endpoint(0)));
    EXPECT_THAT(e.what(), HasSubstr(etcd.endpoint(2)));
  }
}

TEST(EtcdRendezvous, NodesFormARoundLoseOneAndGrowBack) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  const auto o = quick(etcd, 2, 3);
  auto a = node(o), b = node(o), c = node(o);
  expect_one_world(join_all({a.get(), b.get(), c.get()}), 0, 2);
  c.reset();  // its launcher ends: its lease is revoked, its link closes
  ASSERT_NO_FATAL_FAILURE(
      test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart, {"left"}, 10s));
  expect_one_world(join_all({a.get(), b.get()}), 1, 2);
  EXPECT_FALSE(a->wait_notice(200ms).has_value()) << "the round runs";
  auto d = node(o);
  auto late = std::async(std::launch::async, [&] { return d->join(); });
  ASSERT_NO_FATAL_FAILURE(
      test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart, {"joined"}, 10s));
  auto rounds = join_all({a.get(), b.get()});
  rounds.push_back(late.get());
  expect_one_world(rounds, 2, 2);
}

TEST(EtcdRendezvous, ASilentNodeCountsAsGoneWhenItsLeaseEnds) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  const auto o = quick(etcd, 2, 3);
  auto a = node(o), b = node(o);
  // A third node whose launcher stops answering (a machine that hangs): a record under a lease
  // nobody keeps alive, and a liveness port that accepts but is never closed.
  int link_port = 0;
  UniqueFd link = listen_on("127.0.0.1", 0, &link_port);
  Gateway gw = gateway_of(etcd);
  const Keys keys(o.run_id);
  auto joins = std::async(std::launch::async, [&] { return join_all({a.get(), b.get()}); });
  ASSERT_TRUE(test::eventually([&] { return !gw.range(keys.state()).kvs.empty(); }, 10s));
  const auto s = state_in(gw, keys, std::nullopt);
  ASSERT_TRUE(s.record) << s.problem;
  const Gateway::Lease lease = gw.grant(2s);
  const auto granted = std::chrono::steady_clock::now();
  const std::string key = keys.node(s.record->generation, "silent");
  gw.txn({},
         {{Op::Kind::kPut, key, encode_node({"127.0.0.1", 2, link_port, 0, lease.id, 0}, key, {}),
           lease.id, ""}},
         {});
  const auto rounds = joins.get();
  EXPECT_EQ(rounds[0].nnodes, 3) << "the silent node was a member";
  const auto notice = a->wait_notice(10s);
  ASSERT_TRUE(notice.has_value());
  EXPECT_THAT(notice->reason, HasSubstr("left: its lease ended"));
  // Only once its lease ended: etcd ends a lease no sooner than its 2 s TTL after the grant
  // (less the grant's round trip; a loaded machine only makes it later), and then it is gone.
  EXPECT_GE(std::chrono::steady_clock::now() - granted, 1500ms) << "only once its lease ended";
  EXPECT_FALSE(gw.time_to_live(lease.id));
  ASSERT_TRUE(b->wait_notice(5s).has_value());
  expect_one_world(join_all({a.get(), b.get()}), 1, 2);
}

TEST(EtcdRendezvous, FailuresCountAgainstMaxRestartsThenTheRunIsAborted) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  const auto o = quick(etcd, 2, 2);
  auto a = node(o), b = node(o);
  join_all({a.get(), b.get()});
  a->report_failure("rank 1 exited with code 1");
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kRestart,
                                               {"rank 1 exited with code 1"}, 10s));
  EXPECT_EQ(join_all({a.get(), b.get()})[0].round, 1);
  b->report_failure("rank 3 killed by SIGSEGV");
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({a.get(), b.get()}, RendezvousNotice::Kind::kAbort,
                                               {"exceed --max-restarts 1"}, 10s));
  try {
    a->join();
    FAIL() << "joined an aborted run";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("aborted"));
  }
}

TEST(EtcdRendezvous, DoneNodesFinishTheRunAndANewRunUnderTheIdStartsAfresh) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  const auto o = quick(etcd, 2, 2);
  {
    auto a = node(o), b = node(o);
    join_all({a.get(), b.get()});
    a->report_failure("once");
    ASSERT_TRUE(a->wait_notice(10s));
    ASSERT_TRUE(b->wait_notice(10s));
    EXPECT_EQ(join_all({a.get(), b.get()})[0].round, 1);
    a->report_done();
    EXPECT_FALSE(b->wait_notice(500ms)) << "a finished node leaving ends nothing";
    a.reset();
    EXPECT_FALSE(b->wait_notice(500ms));
    b->report_done();
  }
  auto c = node(o), d = node(o);  // the same id again: leftovers do not count
  const auto rounds = join_all({c.get(), d.get()});
  EXPECT_EQ(rounds[0].round, 0);
  c->report_failure("first failure of the new run");
  const auto notice = c->wait_notice(10s);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->kind, RendezvousNotice::Kind::kRestart) << "the old run's failure is not its";
}

TEST(EtcdRendezvous, AloneBelowMinGivesUpAfterTheJoinTimeout) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  auto o = quick(etcd, 2, 3);
  o.join_timeout = 1s;
  auto a = node(o);
  try {
    a->join();
    FAIL() << "joined alone";
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 node(s) joined, at least 2 needed"));
    EXPECT_THAT(e.what(), HasSubstr(etcd.endpoint(0)));
  }
}

TEST(EtcdRendezvous, WithATokenStrangersAreIgnoredAndWhatTheyWriteIsRepaired) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  auto o = quick(etcd, 2, 3);
  o.token = "s3cret";
  auto a = node(o), b = node(o);
  const auto rounds = join_all({a.get(), b.get()});
  Gateway gw = gateway_of(etcd);
  const Keys keys(o.run_id);
  const auto s = state_in(gw, keys, o.token);
  ASSERT_TRUE(s.record) << s.problem;
  const std::string gen = s.record->generation;
  // A stranger's record, unsigned, asking to join: ignored (the round has room, nothing ends).
  const Gateway::Lease lease = gw.grant(30s);
  const std::string stranger = keys.node(gen, "stranger");
  gw.txn({},
         {{Op::Kind::kPut, stranger,
           encode_node({"10.66.66.66", 2, 1, rounds[0].round + 1, lease.id, 0}, stranger, {}),
           lease.id, ""}},
         {});
  EXPECT_FALSE(a->wait_notice(1s)) << "an unsigned record joins nothing";
  // A member's record deleted by someone else: its lease lives, it has not left.
  const std::string a_record = [&] {
    for (const auto& kv : gw.range(keys.nodes(gen), prefix_end(keys.nodes(gen))).kvs) {
      if (kv.key != stranger) {
        return kv.key;
      }
    }
    return std::string();
  }();
  gw.txn({}, {{Op::Kind::kDelete, a_record, "", 0, ""}}, {});
  EXPECT_FALSE(a->wait_notice(1s)) << "a deleted record while its lease lives is no departure";
  // The state overwritten with garbage, then with an older state: written back each time.
  const std::string newest = gw.range(keys.state()).kvs.at(0).value;
  gw.txn({}, {{Op::Kind::kPut, keys.state(), R"({"v":1,"gen":"x"})", 0, ""}}, {});
  EXPECT_TRUE(test::eventually([&] { return state_in(gw, keys, o.token).record.has_value(); }, 10s))
      << "repaired";
  const auto repaired = state_in(gw, keys, o.token).record;
  EXPECT_EQ(repaired->members, s.record->members);
  EXPECT_GT(repaired->step, s.record->step);
  gw.txn({}, {{Op::Kind::kPut, keys.state(), newest, 0, ""}}, {});  // a replay of an older step
  EXPECT_TRUE(test::eventually(
      [&] {
        const auto now = state_in(gw, keys, o.token).record;
        return now && now->step > repaired->step;
      },
      10s))
      << "the replay was written over";
  EXPECT_FALSE(a->wait_notice(200ms));
  EXPECT_FALSE(b->wait_notice(10ms)) << "through all of it the round ran";
  // A node with another token is refused, saying why, and the run goes on.
  auto other = o;
  other.token = "not-the-secret";
  auto wrong = node(other);
  try {
    wrong->join();
    FAIL() << "joined with another token";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("signature does not match"));
  }
  auto plain = o;
  plain.token.reset();
  auto tokenless = node(plain);
  try {
    tokenless->join();
    FAIL() << "joined without the token";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("signed with a token, and this node has none"));
  }
  EXPECT_FALSE(a->wait_notice(200ms)) << "the run went on";
}

TEST(EtcdRendezvous, GarbageRecordsAndFloodsOfConnectionsAreIgnoredAndTheRunGoesOn) {
  test::EtcdCluster etcd;
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  auto o = quick(etcd, 2, 3);
  o.token = "s3cret";
  auto a = node(o), b = node(o);
  join_all({a.get(), b.get()});
  Gateway gw = gateway_of(etcd);
  const Keys keys(o.run_id);
  const auto s = state_in(gw, keys, o.token);
  ASSERT_TRUE(s.record);
  const std::string nodes = keys.nodes(s.record->generation);
  for (int i = 0; i < 300; ++i) {
    const std::string value = i % 3 == 0   ? std::string("not json")
                              : i % 3 == 1 ? std::string(R"({"v":7,"op":"teleport"})")
                              : i < 20     ? std::string(1'000'000, 'x')
                                           : std::string(R"({"v":1,"host":"h"})");
    gw.txn({}, {{Op::Kind::kPut, nodes + "junk" + std::to_string(i), value, 0, ""}}, {});
  }
  // A flood of connections to a member's liveness port.
  std::vector<UniqueFd> flood;
  const int link_port = s.record->members.at(1).link_port;
  for (int i = 0; i < 200; ++i) {
    std::string why;
    flood.push_back(connect_to("127.0.0.1", link_port, 1s, &why));
  }
  EXPECT_FALSE(a->wait_notice(2s)) << "nothing ended the round";
  EXPECT_FALSE(b->wait_notice(10ms));
  auto c = node(o);  // a real node still gets in
  auto late = std::async(std::launch::async, [&] { return c->join(); });
  ASSERT_TRUE(a->wait_notice(10s));
  ASSERT_TRUE(b->wait_notice(10s));
  auto rounds = join_all({a.get(), b.get()});
  rounds.push_back(late.get());
  expect_one_world(rounds, 1, 2);
}

TEST(EtcdRendezvous, LosingAMinorityOfEtcdChangesNothingAndLosingItAllEndsTheRun) {
  test::EtcdCluster etcd({.members = 3});
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  const auto o = quick(etcd, 2, 3);
  auto a = node(o), b = node(o);
  join_all({a.get(), b.get()});
  etcd.kill(0);  // the first endpoint: every node's gateway was on it
  EXPECT_FALSE(a->wait_notice(3s)) << "no restart";
  EXPECT_FALSE(b->wait_notice(10ms));
  auto c = node(o);  // etcd still works: a newcomer gets in
  auto late = std::async(std::launch::async, [&] { return c->join(); });
  ASSERT_TRUE(a->wait_notice(10s));
  ASSERT_TRUE(b->wait_notice(10s));
  auto rounds = join_all({a.get(), b.get()});
  rounds.push_back(late.get());
  expect_one_world(rounds, 1, 2);
  etcd.kill(1);
  etcd.kill(2);
  // Within the deadline expect_notices holds them to: no wall-clock bet beyond it.
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({a.get(), b.get(), c.get()},
                                               RendezvousNotice::Kind::kAbort,
                                               {"answered nothing for", etcd.endpoint(2)}, 20s));
}

TEST(EtcdRendezvous, OverTlsWithAClientCertificate) {
  test::EtcdCluster etcd({.tls = true});
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  auto o = quick(etcd, 2, 2);
  o.etcd.protocol = "https";
  o.etcd.cacert = etcd.client_tls().cacert;
  o.etcd.cert = etcd.client_tls().cert;
  o.etcd.key = etcd.client_tls().key;
  auto a = node(o), b = node(o);
  expect_one_world(join_all({a.get(), b.get()}), 0, 2);
  auto no_cert = o;
  no_cert.etcd.cert.clear();
  no_cert.etcd.key.clear();
  no_cert.join_timeout = 1s;
  try {
    node(no_cert)->join();
    FAIL() << "joined without the client certificate etcd asks for";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("etcd did not answer within join_timeout"));
  }
}

TEST(EtcdRendezvous, WithEtcdsAuthenticationItsUserJoinsAndOthersAreToldWhatToDo) {
  test::EtcdCluster etcd({.auth = true});
  ZEUS_SKIP_WITHOUT_ETCD(etcd);
  auto o = quick(etcd, 2, 2);
  o.etcd.user = test::EtcdCluster::kUser;
  o.etcd.password = test::EtcdCluster::kPassword;
  auto a = node(o), b = node(o);
  expect_one_world(join_all({a.get(), b.get()}), 0, 2);
  try {
    node(quick(etcd, 1, 1))->join();
    FAIL() << "joined an etcd with authentication on, without a user";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("user=NAME,password_file=PATH"));
  }
  auto wrong = quick(etcd, 1, 1);
  wrong.etcd.user = test::EtcdCluster::kUser;
  wrong.etcd.password = "not-the-password";
  try {
    node(wrong)->join();
    FAIL() << "joined with a wrong password";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("refused user 'zeus'"));
  }
  EXPECT_FALSE(a->wait_notice(200ms)) << "the run went on";
}

TEST(EtcdRendezvous, NoEtcdAtAllIsSaidAfterTheJoinTimeout) {
  auto o = quick_at({fmt::format("127.0.0.1:{}", test::free_port())}, 1, 1);
  o.join_timeout = 1s;
  auto a = node(o);
  try {
    a->join();
    FAIL() << "joined without etcd";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("etcd did not answer within join_timeout 1.0 s"));
    EXPECT_THAT(e.what(), HasSubstr("--rdzv-endpoint"));
  }
}

}  // namespace
}  // namespace zeus::launch::etcd
