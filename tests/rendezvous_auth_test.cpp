// The c10d rendezvous lets no stranger in (Note [rendezvous authentication]): with a token, a
// node without it, with another one, or replaying a member's message is refused, logged, and the
// run goes on; bad input and floods of connections are refused the same way; a rendezvous
// without a token beyond loopback says what that allows.
#include "zeus/launch/rendezvous_auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "support/line_peer.h"
#include "support/rendezvous_support.h"
#include "zeus/common/errors.h"
#include "zeus/common/posix.h"
#include "zeus/launch/c10d/channel.h"
#include "zeus/launch/c10d/client.h"
#include "zeus/launch/c10d/protocol.h"
#include "zeus/launch/c10d/server.h"

namespace zeus::launch::c10d {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

RendezvousOptions keyed(std::optional<std::string> token, int max_nodes = 3) {
  RendezvousOptions o;
  o.run_id = "job9";
  o.min_nodes = 2;
  o.max_nodes = max_nodes;
  o.last_call = 300ms;
  o.join_timeout = 20s;
  o.heartbeat = 50ms;
  o.keep_alive = 2s;
  o.token = std::move(token);
  return o;
}

using Raw = test::LinePeer;

// A running round of two nodes with the token, and the server.
struct KeyedRun {
  explicit KeyedRun(int max_nodes = 3)
      : max_nodes(max_nodes), server("127.0.0.1", 0, keyed("s3cret", max_nodes)) {
    a = node("s3cret");
    b = node("s3cret");
    auto ja = std::async(std::launch::async, [&] { return a->join(); });
    auto jb = std::async(std::launch::async, [&] { return b->join(); });
    rounds = {ja.get(), jb.get()};
  }
  std::unique_ptr<Client> node(std::optional<std::string> token) {
    return std::make_unique<Client>("127.0.0.1", server.port(), keyed(std::move(token), max_nodes),
                                    RendezvousNode{"127.0.0.1", 2});
  }
  // Nothing ended the members' round.
  void expect_still_running() {
    EXPECT_FALSE(a->wait_notice(300ms).has_value()) << "the round went on";
    EXPECT_FALSE(b->wait_notice(10ms).has_value());
  }
  int max_nodes;
  Server server;
  std::unique_ptr<Client> a, b;
  std::vector<RendezvousRound> rounds;
};

TEST(RendezvousAuth, NodesWithTheTokenFormARound) {
  KeyedRun run;
  EXPECT_EQ(run.rounds[0].world_size, 4);
  EXPECT_EQ(run.rounds[0].nnodes, 2);
  EXPECT_EQ(run.server.refused(), 0);
  run.expect_still_running();
}

TEST(RendezvousAuth, ANodeWithoutTheTokenIsRefusedAndTheRunGoesOn) {
  KeyedRun run;
  auto stranger = run.node(std::nullopt);
  try {
    stranger->join();
    FAIL() << "joined without the token";
  } catch (const DistError& e) {
    EXPECT_THAT(e.what(), HasSubstr("requires a token and the node has none"));
    EXPECT_THAT(e.what(), HasSubstr("token_file"));
  }
  EXPECT_GE(run.server.refused(), 1);
  run.expect_still_running();
}

TEST(RendezvousAuth, ANodeWithAnotherTokenIsRefusedSayingSoAndTheRunGoesOn) {
  KeyedRun run;
  auto other = run.node("not-the-secret");
  try {
    other->join();
    FAIL() << "joined with another token";
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("wrong signature"));
    EXPECT_THAT(e.what(), HasSubstr("token differs"));
  }
  run.expect_still_running();
  // The server logs the attempt (a close after the welcome without a signed message).
  for (int i = 0; i < 100 && run.server.refused() == 0; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GE(run.server.refused(), 1);
}

TEST(RendezvousAuth, RawJoinsWithoutOrWithAForgedSignatureAreRefused) {
  KeyedRun run;
  {  // the issue's attack: one join line with the run id and a host of its choosing
    Raw p(run.server.port());
    ASSERT_TRUE(p.send(R"({"v":2,"op":"hello","run_id":"job9","nonce":"x","auth":false})"
                       "\n"
                       R"({"v":2,"op":"join","host":"10.66.66.66","nproc":2})"
                       "\n"));
    const std::string answer = p.line();
    EXPECT_THAT(answer, HasSubstr("refused"));
    EXPECT_THAT(answer, HasSubstr("requires a token"));
    EXPECT_TRUE(p.closed());
  }
  {  // claims a token, then sends an unsigned join
    Raw p(run.server.port());
    ASSERT_TRUE(p.send(R"({"v":2,"op":"hello","run_id":"job9","nonce":"x","auth":true})"
                       "\n"));
    EXPECT_THAT(p.line(), HasSubstr("welcome"));
    ASSERT_TRUE(p.send(R"({"v":2,"op":"join","host":"10.66.66.66","nproc":2})"
                       "\n"));
    EXPECT_THAT(p.line(), HasSubstr("'join' is not signed"));
    EXPECT_TRUE(p.closed());
  }
  {  // a made-up signature
    Raw p(run.server.port());
    ASSERT_TRUE(p.send(R"({"v":2,"op":"hello","run_id":"job9","nonce":"x","auth":true})"
                       "\n"));
    EXPECT_THAT(p.line(), HasSubstr("welcome"));
    ASSERT_TRUE(p.send(R"({"v":2,"op":"join","host":"10.66.66.66","nproc":2,"seq":1,)"
                       R"("mac":"00000000000000000000000000000000"})"
                       "\n"));
    EXPECT_THAT(p.line(), HasSubstr("wrong signature"));
  }
  run.expect_still_running();
  EXPECT_GE(run.server.refused(), 3);
}

TEST(RendezvousAuth, AMessageReplayedOnAnotherConnectionIsRefused) {
  KeyedRun run(/*max_nodes=*/2);  // full: a third node waits for a later round, ending nothing
  // A legitimate node's session, recorded: its hello and its signed join.
  Raw first(run.server.port());
  Channel client(Channel::Side::kClient, "s3cret");
  ASSERT_TRUE(first.send(client.seal(Hello{"job9", {}, false}) + "\n"));
  client.open(first.line());  // the welcome: begins the session
  const std::string join = client.seal(Join{"127.0.0.1", 2});
  ASSERT_TRUE(first.send(join + "\n"));
  // The recording, replayed on a connection of its own.
  Raw replay(run.server.port());
  ASSERT_TRUE(replay.send(R"({"v":2,"op":"hello","run_id":"job9","nonce":"x","auth":true})"
                          "\n"));
  EXPECT_THAT(replay.line(), HasSubstr("welcome"));
  ASSERT_TRUE(replay.send(join + "\n"));
  const std::string answer = replay.line();
  EXPECT_THAT(answer, HasSubstr("wrong signature"));
  EXPECT_THAT(answer, HasSubstr("recorded on another connection"));
  EXPECT_TRUE(replay.closed());
  run.expect_still_running();
}

TEST(RendezvousAuth, AChannelRefusesARepeatedOrSkippedCounter) {
  Channel server(Channel::Side::kServer, "k");
  Channel client(Channel::Side::kClient, "k");
  const Message hello = server.open(client.seal(Hello{"r", {}, false}));
  server.begin(std::get<Hello>(hello).nonce);
  client.open(server.seal(Welcome{"r", {}, false}));
  const std::string first = client.seal(Heartbeat{});
  const std::string second = client.seal(Heartbeat{});
  EXPECT_NO_THROW(server.open(first));
  try {
    server.open(first);
    FAIL() << "a repeated message was taken";
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr("counter 1 where 2 was due"));
  }
  const std::string third = client.seal(Heartbeat{});
  EXPECT_THROW(server.open(third), AuthError) << "counter 3 where 2 is due: skipped";
  EXPECT_NO_THROW(server.open(second));
}

TEST(RendezvousAuth, AnotherProtocolVersionIsRefusedNamingBoth) {
  KeyedRun run;
  Raw p(run.server.port());
  ASSERT_TRUE(p.send(R"({"v":1,"op":"hello","run_id":"job9"})"
                     "\n"));
  const std::string answer = p.line();
  EXPECT_THAT(answer, HasSubstr("speaks protocol version 2 and the node version 1"));
  EXPECT_TRUE(p.closed());
  run.expect_still_running();
}

TEST(RendezvousAuth, BadInputAndFloodsAreRefusedAndTheRunGoesOn) {
  KeyedRun run;
  for (const std::string& bad :
       {std::string("garbage, not JSON\n"), std::string(R"({"v":2,"op":"teleport"})") + "\n",
        std::string(70'000, 'x')}) {
    Raw p(run.server.port());
    ASSERT_TRUE(p.send(bad));
    EXPECT_TRUE(p.closed()) << bad.substr(0, 30);
  }
  // A flood of connections that say nothing, beyond the server's bounds.
  std::vector<std::unique_ptr<Raw>> flood;
  for (size_t i = 0; i < Server::kMaxPending + 40; ++i) {
    flood.push_back(std::make_unique<Raw>(run.server.port()));
  }
  // A real node still gets in (the oldest idle connections were evicted for it).
  auto newcomer = run.node("s3cret");
  auto joined = std::async(std::launch::async, [&] { return newcomer->join(); });
  ASSERT_NO_FATAL_FAILURE(test::expect_notices({run.a.get(), run.b.get()},
                                               RendezvousNotice::Kind::kRestart, {"joined"}, 10s));
  auto ja = std::async(std::launch::async, [&] { return run.a->join(); });
  auto jb = std::async(std::launch::async, [&] { return run.b->join(); });
  EXPECT_EQ(joined.get().nnodes, 3);
  EXPECT_EQ(ja.get().nnodes, 3);
  EXPECT_EQ(jb.get().nnodes, 3);
  EXPECT_GE(run.server.refused(), 40 + 3);
}

TEST(RendezvousAuth, WithoutATokenBeyondLoopbackItSaysWhatAnyoneCanDo) {
  testing::internal::CaptureStderr();
  { Server open_to_all("0.0.0.0", 0, keyed(std::nullopt)); }
  { Server loopback("127.0.0.1", 0, keyed(std::nullopt)); }
  { Server keyed_all("0.0.0.0", 0, keyed("s3cret")); }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("listens on 0.0.0.0"));
  EXPECT_THAT(err, HasSubstr("anyone who can reach this port can join the run"));
  EXPECT_THAT(err, HasSubstr("token_file"));
  EXPECT_EQ(err.find("without a token"), err.rfind("without a token")) << "said once: " << err;
}

}  // namespace
}  // namespace zeus::launch::c10d
