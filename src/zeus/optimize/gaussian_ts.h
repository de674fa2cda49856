// The Thompson stage's arm, once for both of upstream's variants (the paper's optimizer and its
// server's GaussianTS): a Gaussian posterior over an arm's mean reward (-cost) with a normal
// prior, and a draw from it. The paper's optimizer uses a flat prior (precision 0), the server
// the job's mab_prior_mean and mab_prior_precision.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace zeus::optimize {

// Upstream's GaussianTsArmState (the server stores these columns).
struct GaussianArm {
  double param_mean = 0;
  double param_precision = 0;
  double reward_precision = 0;
  int64_t num_observations = 0;
};

// Fitted to `rewards` (their population variance is the reward noise, as numpy's np.var): no
// rewards give the prior; equal rewards an exact belief (infinite precision).
GaussianArm fit_gaussian_arm(double prior_mean, double prior_precision,
                             const std::vector<double>& rewards);

// A draw from the arm's posterior: N(mean, 1/precision), its standard deviation times `spread`
// when `spread` > 0 (lean's narrower belief); the mean itself, with no draw from `rng`, when the
// precision is infinite; a very wide draw when it is 0 (no prior, nothing observed).
double draw_gaussian_arm(const GaussianArm& arm, double spread, std::mt19937_64& rng);

}  // namespace zeus::optimize
