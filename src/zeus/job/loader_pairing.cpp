#include "zeus/job/loader_pairing.h"

#include <fmt/format.h>

#include <utility>

#include "zeus/common/errors.h"

namespace zeus::job {

LoaderPairing::LoaderPairing(std::string loader_name) : loader_name_(std::move(loader_name)) {}

LoaderId LoaderPairing::add_train(std::weak_ptr<EnergyJob> job) {
  std::lock_guard lock(mu_);
  if (train_) {
    throw ConfigError(fmt::format(
        "a second train loader (max_epochs set) in one process; {} drives one job per process "
        "(close or destroy the first one to start another)",
        loader_name_));
  }
  train_ = next_++;
  train_job_ = std::move(job);
  return *train_;
}

LoaderId LoaderPairing::add_eval() {
  std::lock_guard lock(mu_);
  const LoaderId id = next_++;
  evals_.insert(id);
  return id;
}

void LoaderPairing::remove(LoaderId id) noexcept {
  std::lock_guard lock(mu_);
  if (train_ == id) {
    train_.reset();
    train_job_.reset();
  }
  evals_.erase(id);
}

void LoaderPairing::check_can_start_epochs() const {
  std::lock_guard lock(mu_);
  if (evals_.empty()) {
    throw ConfigError(fmt::format(
        "the eval loader is missing: make a {} without max_epochs for the validation set before "
        "epochs(); its loop is measured with the train loop, as in Zeus",
        loader_name_));
  }
}

std::shared_ptr<EnergyJob> LoaderPairing::train_job() const {
  std::lock_guard lock(mu_);
  return train_job_.lock();
}

std::optional<LoaderId> LoaderPairing::train() const {
  std::lock_guard lock(mu_);
  return train_;
}

size_t LoaderPairing::eval_loaders() const {
  std::lock_guard lock(mu_);
  return evals_.size();
}

}  // namespace zeus::job
