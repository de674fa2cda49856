// What the rendezvous tests of both backends share: nodes joining at once, and the checks of one
// world.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <set>
#include <vector>

#include "zeus/launch/rendezvous.h"

namespace zeus::test {

// Every node joins at once (each from a thread); the rounds in the nodes' order.
template <class Node>
std::vector<launch::RendezvousRound> join_all(const std::vector<Node*>& nodes) {
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

}  // namespace zeus::test
