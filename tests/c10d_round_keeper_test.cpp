// The c10d rendezvous's decisions without sockets or a clock (launch/c10d/round_keeper.h): time
// is a variable of the test, messages are values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "zeus/common/errors.h"
#include "zeus/launch/c10d/round_keeper.h"

namespace zeus::launch::c10d {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct World {
  explicit World(int min_nodes, int max_nodes) : keeper(options(min_nodes, max_nodes), t) {}
  static RendezvousOptions options(int min_nodes, int max_nodes) {
    RendezvousOptions o;
    o.run_id = "job7";
    o.min_nodes = min_nodes;
    o.max_nodes = max_nodes;
    o.last_call = 30s;
    o.keep_alive = 5s;
    o.max_restarts = 1;
    return o;
  }
  // Messages sent to `peer` by the last call, in order.
  template <class M>
  std::vector<M> to(PeerId peer) const {
    std::vector<M> out;
    for (const auto& s : last.send) {
      if (s.to == peer) {
        if (const auto* m = std::get_if<M>(&s.message)) {
          out.push_back(*m);
        }
      }
    }
    return out;
  }
  RdzvActions& feed(RdzvActions a) { return last = std::move(a); }
  void join(PeerId id, const std::string& host, int nproc = 2) {
    feed(keeper.connected(id, t));
    feed(keeper.received(id, Hello{"job7"}, t));
    feed(keeper.received(id, Join{host, nproc}, t));
  }
  RdzvTime t{};
  RoundKeeper keeper;
  RdzvActions last;
};

TEST(RoundKeeper, AFullRoundAsksNodeZeroForThePortThenTellsEveryMember) {
  World w(2, 2);
  w.join(1, "a");
  EXPECT_EQ(w.to<Waiting>(1).size(), 1u);
  w.join(2, "b");
  ASSERT_EQ(w.to<PortRequest>(1).size(), 1u) << "node 0 (first to join) is asked";
  EXPECT_TRUE(w.to<Round>(2).empty()) << "no round before the port is known";
  w.t += 10ms;
  w.feed(w.keeper.received(1, PortReply{0, 4242}, w.t));
  const auto r1 = w.to<Round>(1), r2 = w.to<Round>(2);
  ASSERT_EQ(r1.size(), 1u);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r1[0].node_rank, 0);
  EXPECT_EQ(r2[0].node_rank, 1);
  EXPECT_EQ(r2[0].first_rank, 2);
  EXPECT_EQ(r2[0].world_size, 4);
  EXPECT_EQ(r2[0].master_addr, "a");
  EXPECT_EQ(r2[0].master_port, 4242);
}

TEST(RoundKeeper, MinNodesCloseAfterTheLastCallWithoutANewcomer) {
  World w(2, 3);
  w.join(1, "a");
  w.join(2, "b");
  w.t += 29s;
  w.feed(w.keeper.received(1, Heartbeat{}, w.t));
  w.feed(w.keeper.received(2, Heartbeat{}, w.t));
  w.feed(w.keeper.tick(w.t));
  EXPECT_TRUE(w.to<PortRequest>(1).empty());
  w.t += 1s;
  w.feed(w.keeper.tick(w.t));
  EXPECT_EQ(w.to<PortRequest>(1).size(), 1u);
}

TEST(RoundKeeper, NodeZeroSilentAtTheCloseIsDroppedAndTheOthersCloseWithoutIt) {
  World w(1, 2);
  w.join(1, "a");
  w.join(2, "b");
  ASSERT_EQ(w.to<PortRequest>(1).size(), 1u);
  w.t += 3s;
  w.feed(w.keeper.received(2, Heartbeat{}, w.t));
  w.t += 3s;  // node 1 silent for 6 s > keep_alive
  w.feed(w.keeper.received(2, Heartbeat{}, w.t));
  w.feed(w.keeper.tick(w.t));
  EXPECT_THAT(w.last.close, ::testing::Contains(PeerId{1}));
  EXPECT_TRUE(w.to<PortRequest>(2).empty()) << "back to waiting: the last call runs";
  w.t += 24s;  // 30 s after the last join; b's heartbeat lets the keeper act
  w.feed(w.keeper.received(2, Heartbeat{}, w.t));
  ASSERT_EQ(w.to<PortRequest>(2).size(), 1u) << "b closes a round of one";
  w.feed(w.keeper.received(2, PortReply{0, 5000}, w.t));
  ASSERT_EQ(w.to<Round>(2).size(), 1u);
  EXPECT_EQ(w.to<Round>(2)[0].nnodes, 1);
}

TEST(RoundKeeper, AMemberLeavingRestartsTheOthersAndFailuresAbortPastMaxRestarts) {
  World w(2, 2);
  w.join(1, "a");
  w.join(2, "b");
  w.feed(w.keeper.received(1, PortReply{0, 4242}, w.t));
  w.feed(w.keeper.received(1, Failed{"rank 0 exited 1"}, w.t));
  ASSERT_EQ(w.to<Restart>(2).size(), 1u);
  EXPECT_THAT(w.to<Restart>(2)[0].reason, HasSubstr("rank 0 exited 1"));
  w.feed(w.keeper.received(1, Join{"a", 2}, w.t));
  w.feed(w.keeper.received(2, Join{"b", 2}, w.t));
  w.feed(w.keeper.received(1, PortReply{1, 4243}, w.t));
  ASSERT_EQ(w.to<Round>(2).size(), 1u);
  EXPECT_EQ(w.to<Round>(2)[0].round, 1);
  w.feed(w.keeper.received(2, Failed{"rank 3 SIGSEGV"}, w.t));
  ASSERT_EQ(w.to<Abort>(1).size(), 1u);
  EXPECT_THAT(w.to<Abort>(1)[0].reason, HasSubstr("exceed --max-restarts 1"));
  EXPECT_TRUE(w.keeper.over());
  w.feed(w.keeper.disconnected(2, w.t));
  EXPECT_TRUE(w.last.send.empty());
}

TEST(RoundKeeper, AStaleOrWrongPortReplyIsIgnoredOrRefused) {
  World w(2, 2);
  w.join(1, "a");
  w.join(2, "b");
  w.feed(w.keeper.received(2, PortReply{0, 4242}, w.t));
  EXPECT_TRUE(w.last.send.empty()) << "only node 0's answer counts";
  w.feed(w.keeper.received(1, PortReply{7, 4242}, w.t));
  EXPECT_TRUE(w.last.send.empty()) << "an answer for another round";
  w.feed(w.keeper.received(1, PortReply{0, 0}, w.t));
  EXPECT_THAT(w.last.close, ::testing::Contains(PeerId{1}));
}

TEST(RoundKeeper, ProtocolOrderIsEnforced) {
  World w(1, 1);
  w.feed(w.keeper.connected(1, w.t));
  w.feed(w.keeper.received(1, Join{"a", 1}, w.t));
  EXPECT_THAT(w.last.close, ::testing::Contains(PeerId{1})) << "a join without a hello";
  w.feed(w.keeper.connected(2, w.t));
  w.feed(w.keeper.received(2, Hello{"job8"}, w.t));
  ASSERT_EQ(w.to<Refused>(2).size(), 1u);
  EXPECT_THAT(w.to<Refused>(2)[0].reason, HasSubstr("serves rendezvous id 'job7', not 'job8'"));
  w.feed(w.keeper.connected(3, w.t));
  w.feed(w.keeper.received(3, Hello{"job7"}, w.t));
  w.feed(w.keeper.received(3, Round{}, w.t));
  EXPECT_THAT(w.last.close, ::testing::Contains(PeerId{3}))
      << "a client sending a server's message";
  EXPECT_THROW(RoundKeeper(World::options(3, 2), w.t), ConfigError);
}

}  // namespace
}  // namespace zeus::launch::c10d
