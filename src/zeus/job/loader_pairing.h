// Note [loader pairing]: the train loader (max_epochs set) drives one energy job per process; the
// eval loaders' loops are measured by that job, as in Zeus. One set of rules for C++'s
// zeus::DataLoader and Python's ZeusDataLoader (bound as _core.LoaderPairing):
//   - one train loader per process at a time; a second is a ConfigError;
//   - eval loaders may be made before or after the train loader; an eval loop reports to the
//     train loader that exists when the loop starts, and measures nothing when there is none (a
//     final test after training);
//   - the train loader's epochs() needs an eval loader (ConfigError otherwise);
//   - loaders are named by ids, never by pointers: the train loader's job is held weakly and an
//     eval loop takes shared ownership for its duration, so a loader destroyed meanwhile cannot
//     leave a dangling pointer behind.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace zeus::job {

class EnergyJob;

using LoaderId = uint64_t;

class LoaderPairing {
 public:
  // `loader_name` names the loader class in errors ("zeus::DataLoader", "ZeusDataLoader").
  explicit LoaderPairing(std::string loader_name);

  // A train loader joins, with its job (empty for a caller that keeps its jobs itself, such as
  // Python). ConfigError when the process has a train loader already.
  [[nodiscard]] LoaderId add_train(std::weak_ptr<EnergyJob> job = {});
  [[nodiscard]] LoaderId add_eval();
  // A loader leaves (its destructor); unknown ids are ignored.
  void remove(LoaderId id) noexcept;

  // Before the train loader's first epoch: ConfigError when there is no eval loader.
  void check_can_start_epochs() const;
  // The job an eval loop reports to: the train loader's, or null when none (or it has none).
  [[nodiscard]] std::shared_ptr<EnergyJob> train_job() const;
  [[nodiscard]] std::optional<LoaderId> train() const;
  [[nodiscard]] size_t eval_loaders() const;

 private:
  std::string loader_name_;
  mutable std::mutex mu_;
  LoaderId next_ = 1;
  std::optional<LoaderId> train_;
  std::weak_ptr<EnergyJob> train_job_;
  std::set<LoaderId> evals_;
};

}  // namespace zeus::job
