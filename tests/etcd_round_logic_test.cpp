// The etcd rendezvous's decisions without etcd (launch/etcd/round_logic.h): views are values, time
// is an argument. And its records: signed for their key, bound to their lease, versioned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "zeus/common/base64.h"
#include "zeus/launch/etcd/records.h"
#include "zeus/launch/etcd/round_logic.h"
#include "zeus/launch/round_rules.h"

namespace zeus::launch::etcd {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Goal = Local::Goal;

RendezvousOptions options(int min_nodes = 2, int max_nodes = 3) {
  RendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min_nodes;
  o.max_nodes = max_nodes;
  o.last_call = 300ms;
  o.keep_alive = 3s;
  o.max_restarts = 1;
  return o;
}

RunState open_round(int round, std::string gen = "G") {
  RunState s;
  s.generation = std::move(gen);
  s.step = 10 + round;
  s.round = round;
  return s;
}

Member member(const std::string& id, int nproc = 2) {
  return {id, "host-" + id, nproc, 4000};
}

RunState closed_round(int round, std::vector<std::string> ids) {
  RunState s = open_round(round);
  s.phase = Phase::kClosed;
  for (const auto& id : ids) {
    s.members.push_back(member(id));
  }
  s.master_addr = "host-" + ids.front();
  s.master_port = 29500;
  return s;
}

NodeRecord record(int want, int64_t revision) {
  return {"host", 2, 4000, want, 7, revision};
}

View view_of(const RunState& s, std::map<std::string, NodeRecord> nodes = {}) {
  View v;
  v.state_present = true;
  v.state = s;
  v.state_mod_revision = 100;
  v.nodes = std::move(nodes);
  v.my_record_alive = true;
  return v;
}

Local me(Goal goal, int round = -1, std::string gen = "G") {
  Local l;
  l.id = "me";
  l.node = {"host-me", 2};
  l.link_port = 5000;
  l.goal = goal;
  l.round = round;
  l.generation = std::move(gen);
  return l;
}

TEST(EtcdRoundLogic, NoStateStartsARunWithThisNodesRecordInTheSameWrite) {
  View v;
  const Decision d = decide(options(), v, me(Goal::kJoin, -1, ""), 0ms);
  ASSERT_TRUE(d.write);
  EXPECT_TRUE(d.fresh_generation);
  EXPECT_EQ(d.write->round, 0);
  EXPECT_EQ(d.write->phase, Phase::kOpen);
  EXPECT_EQ(d.write->step, 1);
  EXPECT_EQ(d.write->generation.size(), 32u) << "a random generation";
  EXPECT_TRUE(decide(options(), v, me(Goal::kIdle, -1, ""), 0ms).idle());
  EXPECT_TRUE(decide(options(), v, me(Goal::kDone, 0, ""), 0ms).idle());
}

TEST(EtcdRoundLogic, AJoiningNodeWaitsInTheOpenRound) {
  const Decision newcomer = decide(options(), view_of(open_round(2), {{"a", record(2, 5)}}),
                                   me(Goal::kJoin, -1, ""), 0ms);
  ASSERT_TRUE(newcomer.want);
  EXPECT_EQ(*newcomer.want, 2);
  EXPECT_FALSE(newcomer.write);
  const Decision member = decide(options(), view_of(open_round(2)), me(Goal::kJoin, 1), 0ms);
  ASSERT_TRUE(member.want) << "a member of round 1 joins round 2";
  EXPECT_EQ(*member.want, 2);
}

TEST(EtcdRoundLogic, MaxNodesCloseTheRoundAtOnceWithTheCloserAsNodeZero) {
  const View v =
      view_of(open_round(0), {{"a", record(0, 50)}, {"me", record(0, 70)}, {"b", record(0, 60)}});
  const Decision d = decide(options(), v, me(Goal::kJoin), 0ms);
  ASSERT_TRUE(d.write);
  EXPECT_TRUE(d.pick_port);
  EXPECT_EQ(d.write->phase, Phase::kClosed);
  EXPECT_EQ(d.write->round, 0);
  EXPECT_EQ(d.write->step, v.state->step + 1);
  ASSERT_EQ(d.write->members.size(), 3u);
  EXPECT_EQ(d.write->members[0].id, "me") << "the closer is node 0";
  EXPECT_EQ(d.write->members[0].link_port, 5000);
  EXPECT_EQ(d.write->members[1].id, "a") << "then the join order";
  EXPECT_EQ(d.write->members[2].id, "b");
  EXPECT_EQ(d.write->master_addr, "host-me");
}

TEST(EtcdRoundLogic, MinNodesCloseOnlyAfterTheLastCallSinceTheSetGrew) {
  const View v = view_of(open_round(0), {{"a", record(0, 50)}, {"me", record(0, 70)}});
  const Decision early = decide(options(), v, me(Goal::kJoin), 100ms);
  EXPECT_FALSE(early.write);
  ASSERT_TRUE(early.wake_in);
  EXPECT_EQ(*early.wake_in, 200ms);
  const Decision late = decide(options(), v, me(Goal::kJoin), 300ms);
  ASSERT_TRUE(late.write);
  EXPECT_EQ(late.write->members.size(), 2u);
  const View alone = view_of(open_round(0), {{"me", record(0, 70)}});
  const Decision below = decide(options(), alone, me(Goal::kJoin), 10s);
  EXPECT_TRUE(below.idle());
  EXPECT_FALSE(below.wake_in) << "below MIN nothing is due";
}

TEST(EtcdRoundLogic, ANodeBeyondMaxLeavesTheClosingToTheChosen) {
  const View v = view_of(
      open_round(0),
      {{"a", record(0, 1)}, {"b", record(0, 2)}, {"c", record(0, 3)}, {"me", record(0, 4)}});
  EXPECT_TRUE(decide(options(), v, me(Goal::kJoin), 0ms).idle());
}

TEST(EtcdRoundLogic, AClosedRoundGivesEachMemberItsPlace) {
  const View v = view_of(closed_round(3, {"a", "me"}), {{"a", record(3, 1)}, {"me", record(3, 2)}});
  const Decision d = decide(options(), v, me(Goal::kJoin), 0ms);
  ASSERT_TRUE(d.joined);
  EXPECT_EQ(d.joined->round, 3);
  EXPECT_EQ(d.joined->node_rank, 1);
  EXPECT_EQ(d.joined->nnodes, 2);
  EXPECT_EQ(d.joined->world_size, 4);
  EXPECT_EQ(d.joined->first_rank, 2);
  EXPECT_EQ(d.joined->master_addr, "host-a");
  EXPECT_EQ(d.joined->master_port, 29500);
}

TEST(EtcdRoundLogic, AMemberWhoseRecordIsGoneEndsTheRoundUnlessItIsDoneOrVouchedFor) {
  RunState s = closed_round(1, {"me", "a", "b"});
  View v = view_of(s, {{"me", record(1, 1)}, {"a", record(1, 2)}});
  const Decision d = decide(options(), v, me(Goal::kRun, 1), 0ms);
  ASSERT_TRUE(d.write);
  EXPECT_EQ(d.write->phase, Phase::kOpen);
  EXPECT_EQ(d.write->round, 2);
  EXPECT_EQ(d.write->failures, 0) << "a node leaving is no failure";
  EXPECT_THAT(d.write->reason, HasSubstr("node 2 (host-b) left: its lease ended"));
  EXPECT_THAT(d.write->reason, HasSubstr("read_timeout 3.0 s"));
  ASSERT_TRUE(d.departed);
  EXPECT_EQ(*d.departed, "b");
  v.vouched.insert("b");
  EXPECT_TRUE(decide(options(), v, me(Goal::kRun, 1), 0ms).idle()) << "its lease lives";
  v.vouched.clear();
  s.done = {"b"};
  EXPECT_TRUE(decide(options(), view_of(s, v.nodes), me(Goal::kRun, 1), 0ms).idle())
      << "a finished member may go";
}

TEST(EtcdRoundLogic, TheSuccessorsClosedLinkEndsTheRound) {
  const RunState s = closed_round(1, {"me", "a"});
  Local l = me(Goal::kRun, 1);
  l.lost = "a";
  const Decision d =
      decide(options(), view_of(s, {{"me", record(1, 1)}, {"a", record(1, 2)}}), l, 0ms);
  ASSERT_TRUE(d.write);
  EXPECT_THAT(d.write->reason, HasSubstr("node 1 (host-a) left: its launcher's link closed"));
}

TEST(EtcdRoundLogic, ANewcomerEndsARoundWithRoomOnly) {
  const View room = view_of(closed_round(1, {"me", "a"}),
                            {{"me", record(1, 1)}, {"a", record(1, 2)}, {"n", record(2, 3)}});
  const Decision member_sees = decide(options(), room, me(Goal::kRun, 1), 0ms);
  ASSERT_TRUE(member_sees.write);
  EXPECT_THAT(member_sees.write->reason, HasSubstr("joined"));
  EXPECT_EQ(member_sees.write->round, 2);
  // The newcomer itself: waits for the next round, then ends this one.
  Local newcomer = me(Goal::kJoin);
  newcomer.id = "n";
  newcomer.node.host = "host-n";
  const Decision self = decide(options(), room, newcomer, 0ms);
  ASSERT_TRUE(self.write);
  EXPECT_THAT(self.write->reason, HasSubstr("node host-n joined"));
  const View full = view_of(
      closed_round(1, {"me", "a", "b"}),
      {{"me", record(1, 1)}, {"a", record(1, 2)}, {"b", record(1, 3)}, {"n", record(2, 4)}});
  EXPECT_TRUE(decide(options(), full, me(Goal::kRun, 1), 0ms).idle()) << "no room: it waits";
  EXPECT_TRUE(decide(options(), full, newcomer, 0ms).idle());
  Local unseated = newcomer;  // not yet waiting for the next round
  const View stale = view_of(closed_round(1, {"me", "a", "b"}), {{"n", record(0, 4)}});
  const Decision w = decide(options(), stale, unseated, 0ms);
  ASSERT_TRUE(w.want);
  EXPECT_EQ(*w.want, 2);
}

TEST(EtcdRoundLogic, FailuresCountAgainstMaxRestartsThenTheRunAborts) {
  Local l = me(Goal::kRun, 1);
  l.failure = "rank 3 exited with code 1";
  RunState s = closed_round(1, {"a", "me"});
  const View v = view_of(s, {{"me", record(1, 1)}, {"a", record(1, 2)}});
  const Decision first = decide(options(), v, l, 0ms);
  ASSERT_TRUE(first.write);
  EXPECT_TRUE(first.reports_failure);
  EXPECT_EQ(first.write->phase, Phase::kOpen);
  EXPECT_EQ(first.write->failures, 1);
  EXPECT_THAT(first.write->reason, HasSubstr("node 1 (host-me): rank 3 exited with code 1"));
  s.failures = 1;
  const Decision second = decide(options(), view_of(s, v.nodes), l, 0ms);
  ASSERT_TRUE(second.write);
  EXPECT_EQ(second.write->phase, Phase::kAborted);
  EXPECT_THAT(second.write->reason, HasSubstr("2 failure(s) exceed --max-restarts 1"));
}

TEST(EtcdRoundLogic, DoneMembersFinishTheRunOnceAllAre) {
  Local l = me(Goal::kRun, 1);
  l.done = true;
  RunState s = closed_round(1, {"a", "me"});
  const View v = view_of(s, {{"me", record(1, 1)}, {"a", record(1, 2)}});
  const Decision first = decide(options(), v, l, 0ms);
  ASSERT_TRUE(first.write);
  EXPECT_TRUE(first.reports_done);
  EXPECT_EQ(first.write->phase, Phase::kClosed);
  EXPECT_EQ(first.write->done, std::vector<std::string>{"me"});
  s.done = {"a"};
  const Decision last = decide(options(), view_of(s, v.nodes), l, 0ms);
  ASSERT_TRUE(last.write);
  EXPECT_EQ(last.write->phase, Phase::kFinished);
}

TEST(EtcdRoundLogic, AStatePastTheMembersRoundIsANotice) {
  RunState restarted = open_round(2);
  restarted.reason = "node 1 (b) left";
  const Decision r = decide(options(), view_of(restarted), me(Goal::kRun, 1), 0ms);
  ASSERT_TRUE(r.notice);
  EXPECT_EQ(r.notice->kind, RendezvousNotice::Kind::kRestart);
  EXPECT_EQ(r.notice->reason, "node 1 (b) left");
  EXPECT_TRUE(decide(options(), view_of(restarted), me(Goal::kFailed, 1), 0ms).notice);
  RunState aborted = closed_round(1, {"me"});
  aborted.phase = Phase::kAborted;
  aborted.reason = "too many failures";
  const Decision a = decide(options(), view_of(aborted), me(Goal::kRun, 1), 0ms);
  ASSERT_TRUE(a.notice);
  EXPECT_EQ(a.notice->kind, RendezvousNotice::Kind::kAbort);
  const Decision j = decide(options(), view_of(aborted), me(Goal::kJoin), 0ms);
  ASSERT_TRUE(j.refuse);
  EXPECT_THAT(*j.refuse, HasSubstr("aborted: too many failures"));
}

TEST(EtcdRoundLogic, ANewcomerStartsAfreshWhenTheRunBeforeIsOverOrAbandoned) {
  RunState finished = closed_round(4, {"a", "b"});
  finished.phase = Phase::kFinished;
  finished.generation = "old";
  const Local newcomer = me(Goal::kJoin, -1, "");
  EXPECT_TRUE(decide(options(), view_of(finished, {{"a", record(4, 1)}}), newcomer, 0ms).idle())
      << "its nodes are still leaving";
  const Decision fresh = decide(options(), view_of(finished), newcomer, 0ms);
  ASSERT_TRUE(fresh.write);
  EXPECT_TRUE(fresh.fresh_generation);
  EXPECT_NE(fresh.write->generation, "old");
  EXPECT_EQ(fresh.write->round, 0) << "nothing of the old run carries over";
  EXPECT_EQ(fresh.write->failures, 0);
  RunState crashed = closed_round(7, {"a", "b"});
  crashed.generation = "old";
  crashed.failures = 1;
  const Decision abandoned = decide(options(), view_of(crashed), newcomer, 0ms);
  ASSERT_TRUE(abandoned.write);
  EXPECT_TRUE(abandoned.fresh_generation);
  EXPECT_THAT(abandoned.log, HasSubstr("abandoned"));
  const Decision live = decide(options(), view_of(crashed, {{"a", record(7, 1)}}), newcomer, 0ms);
  ASSERT_TRUE(live.want) << "a live run under the id: joined as a newcomer";
  EXPECT_EQ(*live.want, 8);
}

TEST(EtcdRoundLogic, AMemberRepairsADeletedForgedOrReplayedState) {
  Local l = me(Goal::kRun, 1);
  l.known = closed_round(1, {"me", "a"});
  View deleted;
  deleted.my_record_alive = true;
  const Decision d1 = decide(options(), deleted, l, 0ms);
  ASSERT_TRUE(d1.write);
  EXPECT_TRUE(d1.repair);
  EXPECT_EQ(d1.write->members, l.known->members);
  EXPECT_EQ(d1.write->step, l.known->step + 1);
  View forged = view_of(open_round(5));
  forged.state.reset();
  forged.state_status = RecordStatus::kUnsigned;
  forged.state_problem = "not signed";
  const Decision d2 = decide(options(), forged, l, 0ms);
  ASSERT_TRUE(d2.write);
  EXPECT_THAT(d2.log, HasSubstr("not signed"));
  RunState replayed = open_round(0);
  replayed.step = 2;
  const Decision d3 = decide(options(), view_of(replayed), l, 0ms);
  ASSERT_TRUE(d3.write);
  EXPECT_EQ(d3.write->phase, Phase::kClosed);
  EXPECT_THAT(d3.log, HasSubstr("an older state (step 2)"));
  const Decision d4 = decide(options(), view_of(open_round(0, "other")), l, 0ms);
  ASSERT_TRUE(d4.write) << "no live node would start another run while this one's record lives";
  EXPECT_EQ(d4.write->generation, "G");
  // Without its own record alive, a node holds nothing against anyone.
  View lost = view_of(open_round(0, "other"), {{"x", record(0, 1)}});
  lost.my_record_alive = false;
  const Decision d5 = decide(options(), lost, l, 0ms);
  EXPECT_FALSE(d5.write);
  ASSERT_TRUE(d5.notice);
  EXPECT_EQ(d5.notice->kind, RendezvousNotice::Kind::kAbort);
}

TEST(EtcdRoundLogic, AJoiningNodeRefusesAStateItCannotTrustAndReplacesGarbage) {
  View v;
  v.state_present = true;
  v.state_status = RecordStatus::kBadSignature;
  v.state_problem = "its signature does not match";
  const Decision d = decide(options(), v, me(Goal::kJoin, -1, ""), 0ms);
  ASSERT_TRUE(d.refuse);
  EXPECT_THAT(*d.refuse, HasSubstr("signature does not match"));
  EXPECT_FALSE(d.write) << "a node with another token never overwrites the run";
  v.state_status = RecordStatus::kMalformed;
  const Decision g = decide(options(), v, me(Goal::kJoin, -1, ""), 0ms);
  ASSERT_TRUE(g.write);
  EXPECT_TRUE(g.fresh_generation);
}

TEST(EtcdRecords, StateAndNodeRecordsRoundTripSignedForTheirKey) {
  const Keys keys("job/7 %x");
  EXPECT_EQ(keys.prefix, "/zeus/rdzv/job%2F7%20%25x/");
  EXPECT_EQ(keys.node("G", "n1"), "/zeus/rdzv/job%2F7%20%25x/g/G/n1");
  EXPECT_EQ(prefix_end("/a/"), "/a0");
  RunState s = closed_round(2, {"a", "b"});
  s.done = {"a"};
  s.reason = "node 1 left";
  const std::string value = encode_state(s, keys.state(), "secret");
  const auto ok = decode_state(value, keys.state(), "secret");
  ASSERT_EQ(ok.status, RecordStatus::kValid) << ok.problem;
  EXPECT_EQ(*ok.record, s);
  EXPECT_EQ(decode_state(value, keys.state(), "other").status, RecordStatus::kBadSignature);
  EXPECT_EQ(decode_state(value, keys.prefix + "elsewhere", "secret").status,
            RecordStatus::kBadSignature)
      << "a record moved to another key";
  EXPECT_EQ(decode_state(value, keys.state(), std::nullopt).status, RecordStatus::kSigned);
  const std::string plain = encode_state(s, keys.state(), std::nullopt);
  EXPECT_EQ(decode_state(plain, keys.state(), std::nullopt).status, RecordStatus::kValid);
  EXPECT_EQ(decode_state(plain, keys.state(), "secret").status, RecordStatus::kUnsigned);
  std::string changed = value;
  changed.replace(changed.find("node 1 left"), 11, "node 2 left");
  EXPECT_EQ(decode_state(changed, keys.state(), "secret").status, RecordStatus::kBadSignature);
  const auto other = decode_state(R"({"v":9,"gen":"G"})", keys.state(), std::nullopt);
  EXPECT_EQ(other.status, RecordStatus::kOtherVersion);
  EXPECT_THAT(other.problem, HasSubstr("record format 9 where this zeus-cpp speaks 1"));
  EXPECT_EQ(decode_state("garbage", keys.state(), std::nullopt).status, RecordStatus::kMalformed);
  EXPECT_EQ(decode_state(R"({"v":1,"gen":"G"})", keys.state(), std::nullopt).status,
            RecordStatus::kMalformed);
}

TEST(EtcdRecords, ANodeRecordCountsOnlyUnderTheLeaseItNames) {
  const std::string key = Keys("job").node("G", "n1");
  const NodeRecord n{"10.0.0.2", 4, 4567, 3, 777, 0};
  KeyValue kv{key, encode_node(n, key, "secret"), 5, 9, 777};
  const auto ok = decode_node(kv, "secret");
  ASSERT_EQ(ok.status, RecordStatus::kValid) << ok.problem;
  EXPECT_EQ(ok.record->host, "10.0.0.2");
  EXPECT_EQ(ok.record->nproc, 4);
  EXPECT_EQ(ok.record->link_port, 4567);
  EXPECT_EQ(ok.record->want, 3);
  EXPECT_EQ(ok.record->mod_revision, 9);
  kv.lease = 778;  // written again, by someone else, under another lease: a replay
  const auto replayed = decode_node(kv, "secret");
  EXPECT_EQ(replayed.status, RecordStatus::kWrongLease);
  EXPECT_THAT(replayed.problem, HasSubstr("names lease 777 and lives by lease 778"));
}

TEST(RoundRules, TheSharedRules) {
  const RendezvousOptions o = options(2, 4);
  EXPECT_FALSE(close_delay(o, 1));
  EXPECT_EQ(close_delay(o, 2), 300ms);
  EXPECT_EQ(close_delay(o, 4), 0ms);
  EXPECT_TRUE(round_closes(o, 5, 0ms));
  EXPECT_FALSE(round_closes(o, 3, 299ms));
  EXPECT_TRUE(round_closes(o, 3, 300ms));
  EXPECT_EQ(round_size(o, 6), 4);
  EXPECT_TRUE(newcomer_ends_round(o, 3));
  EXPECT_FALSE(newcomer_ends_round(o, 4));
  EXPECT_FALSE(count_failure(o, 1, "x").abort);
  EXPECT_TRUE(count_failure(o, 2, "x").abort);
  const auto places = layout_round(1, {2, 3, 1}, "m", 9);
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[2].first_rank, 5);
  EXPECT_EQ(places[2].world_size, 6);
  EXPECT_THROW(check_round_sizes(options(3, 2)), ConfigError);
}

TEST(Base64, RoundTripsAndRefusesWhatIsNot) {
  for (const std::string& s : {std::string(""), std::string("f"), std::string("fo"),
                               std::string("foo"), std::string("\xff\x00\x10zeus", 7)}) {
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  }
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("\xfb\xff", Base64::kUrlNoPadding), "-_8");
  EXPECT_EQ(base64_decode("L3pldXMvYQ=="), "/zeus/a");
  EXPECT_FALSE(base64_decode("abc"));
  EXPECT_FALSE(base64_decode("ab!="));
}

}  // namespace
}  // namespace zeus::launch::etcd
