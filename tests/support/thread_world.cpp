#include "support/thread_world.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "zeus/common/errors.h"

namespace zeus::test {

class ThreadWorld::Rank final : public job::Collectives {
 public:
  Rank(ThreadWorld& world, job::RankInfo info) : world_(world), info_(info) {}
  job::RankInfo ranks() const override { return info_; }
  void all_reduce_sum(std::span<double> values) override {
    world_.collective(info_.rank, Op::kSum, values, 0);
  }
  void broadcast(std::span<double> values, int root) override {
    world_.collective(info_.rank, Op::kBroadcast, values, root);
  }

 private:
  ThreadWorld& world_;
  job::RankInfo info_;
};

ThreadWorld::ThreadWorld(int world_size, int local_world_size)
    : world_size_(world_size),
      local_world_size_(local_world_size),
      in_(static_cast<size_t>(world_size)),
      ops_(static_cast<size_t>(world_size)),
      roots_(static_cast<size_t>(world_size)) {
  ZEUS_ASSERT(world_size >= 1 && local_world_size >= 1 && world_size % local_world_size == 0,
              "world {} in nodes of {}", world_size, local_world_size);
  for (int r = 0; r < world_size; ++r) {
    ranks_.push_back(
        std::make_unique<Rank>(*this, job::RankInfo{r, world_size, r % local_world_size,
                                                    local_world_size, r / local_world_size}));
  }
}

ThreadWorld::~ThreadWorld() = default;

job::Collectives& ThreadWorld::rank(int r) {
  return *ranks_.at(static_cast<size_t>(r));
}

void ThreadWorld::abort(int failed_rank, const std::string& why) {
  std::lock_guard lock(mu_);
  if (error_.empty()) {
    error_ = fmt::format("rank {} failed ({}); the world is aborted", failed_rank, why);
  }
  cv_.notify_all();
}

int ThreadWorld::completed() const {
  std::lock_guard lock(mu_);
  return generation_;
}

void ThreadWorld::collective(int rank, Op op, std::span<double> values, int root) {
  std::unique_lock lock(mu_);
  if (!error_.empty()) {
    throw DistError(error_);
  }
  const auto r = static_cast<size_t>(rank);
  in_[r].assign(values.begin(), values.end());
  ops_[r] = op;
  roots_[r] = root;
  const int generation = generation_;
  if (++arrived_ == world_size_) {
    // The last to arrive checks the call is the same everywhere and computes the result.
    for (size_t i = 0; i < in_.size(); ++i) {
      if (ops_[i] != ops_[0] || roots_[i] != roots_[0] || in_[i].size() != in_[0].size()) {
        error_ = fmt::format(
            "collective {} differs between ranks: rank 0 called {} of {} values (root {}), rank "
            "{} {} of {} (root {})",
            generation, ops_[0] == Op::kSum ? "all_reduce_sum" : "broadcast", in_[0].size(),
            roots_[0], i, ops_[i] == Op::kSum ? "all_reduce_sum" : "broadcast", in_[i].size(),
            roots_[i]);
        cv_.notify_all();
        throw DistError(error_);
      }
    }
    if (op == Op::kSum) {
      out_.assign(in_[0].size(), 0.0);
      for (const auto& part : in_) {
        for (size_t k = 0; k < part.size(); ++k) {
          out_[k] += part[k];
        }
      }
    } else {
      out_ = in_.at(static_cast<size_t>(root));
    }
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else {
    // A peer that never comes (a protocol bug: it left the job early) fails the test, not CI.
    if (!cv_.wait_for(lock, std::chrono::seconds(60),
                      [&] { return generation_ != generation || !error_.empty(); })) {
      error_ = fmt::format("rank {} waited 60 s in collective {} for its peers", rank, generation);
      cv_.notify_all();
    }
    if (generation_ == generation) {
      throw DistError(error_);
    }
  }
  // out_ stays until every rank has entered the next collective, so it is this one's.
  std::copy(out_.begin(), out_.end(), values.begin());
}

std::vector<std::exception_ptr> run_ranks(
    ThreadWorld& world, const std::function<void(int rank, job::Collectives&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world.world_size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < world.world_size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, world.rank(r));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        world.abort(r, e.what());
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return errors;
}

}  // namespace zeus::test
