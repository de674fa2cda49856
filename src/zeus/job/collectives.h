// What an energy-optimized job needs from its process group: who this process is, and two
// collectives on small vectors of doubles. zeus::distributed::Context implements it (zeus_torch); a
// single process uses SingleProcess. Keeping the interface here lets job/ stay free of libtorch.
#pragma once

#include <functional>
#include <span>
#include <string_view>

namespace zeus::job {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;

  bool is_master() const { return rank == 0; }
  bool is_local_master() const { return local_rank == 0; }
};

// Contract: collectives are called in the same order, with the same lengths, on every rank;
// the results are identical on every rank. Failures throw DistError subclasses.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual RankInfo ranks() const = 0;
  // In place: each element becomes its sum over ranks.
  virtual void all_reduce_sum(std::span<double> values) = 0;
  // In place: each element becomes root's.
  virtual void broadcast(std::span<double> values, int root) = 0;
};

// A world of one: collectives return at once.
class SingleProcess final : public Collectives {
 public:
  RankInfo ranks() const override { return {}; }
  void all_reduce_sum(std::span<double> /*values*/) override {}
  void broadcast(std::span<double> /*values*/, int /*root*/) override {}
};

// Collective: returns once every rank called it.
void barrier(Collectives& collectives);

// Runs `step` on every rank; if it failed anywhere, every rank throws (the failing rank its own
// error, the others a ConfigError naming that rank), so no rank is left waiting in a collective.
// Collective.
void agree(Collectives& collectives, std::string_view what, const std::function<void()>& step);

}  // namespace zeus::job
