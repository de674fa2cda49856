// What the rendezvous tests of both backends share: nodes joining at once, and the checks of one
// world.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "zeus/launch/rendezvous.h"

namespace zeus::test {

// Every node joins at once (each from a thread); the rounds in the nodes' order.
template <class Node>
std::vector<launch::RendezvousRound> join_all(std::initializer_list<Node*> nodes) {
  std::vector<std::future<launch::RendezvousRound>> joins;
  for (Node* n : nodes) {
    joins.push_back(std::async(std::launch::async, [n] { return n->join(); }));
  }
  std::vector<launch::RendezvousRound> rounds;
  for (auto& j : joins) {
    rounds.push_back(j.get());
  }
  return rounds;
}

// The rounds are one world: round `round`, every node its own rank, `nproc` ranks each, one
// master on 127.0.0.1.
inline void expect_one_world(const std::vector<launch::RendezvousRound>& rounds, int round,
                             int nproc) {
  std::set<int> node_ranks;
  const int n = static_cast<int>(rounds.size());
  for (const auto& r : rounds) {
    EXPECT_EQ(r.round, round);
    EXPECT_EQ(r.nnodes, n);
    EXPECT_EQ(r.world_size, n * nproc);
    EXPECT_EQ(r.first_rank, r.node_rank * nproc);
    EXPECT_EQ(r.master_addr, "127.0.0.1");
    EXPECT_EQ(r.master_port, rounds[0].master_port);
    EXPECT_GT(r.master_port, 0);
    node_ranks.insert(r.node_rank);
  }
  EXPECT_EQ(node_ranks.size(), rounds.size()) << "every node its own rank";
  EXPECT_EQ(*node_ranks.rbegin(), n - 1);
}

// Every node hears a notice of `kind` within `timeout`, whose reason holds each of `reason_parts`.
// A node that hears none is a fatal failure (what follows would wait on it): call it under
// ASSERT_NO_FATAL_FAILURE.
template <class Node>
void expect_notices(std::initializer_list<Node*> nodes, launch::RendezvousNotice::Kind kind,
                    const std::vector<std::string>& reason_parts,
                    std::chrono::milliseconds timeout) {
  int i = 0;
  for (Node* n : nodes) {
    const auto notice = n->wait_notice(timeout);
    ASSERT_TRUE(notice.has_value())
        << "node " << i << " heard nothing in " << timeout.count() << " ms";
    EXPECT_EQ(notice->kind, kind) << "node " << i << ": " << notice->reason;
    for (const std::string& part : reason_parts) {
      EXPECT_THAT(notice->reason, testing::HasSubstr(part)) << "node " << i;
    }
    ++i;
  }
}

}  // namespace zeus::test
