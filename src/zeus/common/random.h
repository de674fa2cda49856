// Random draws that are the same in every build of zeus-cpp. The standard distributions
// (std::uniform_int_distribution, std::normal_distribution, std::shuffle) are
// implementation-defined: GCC's libstdc++ (the source build) and LLVM's libc++ (the pip wheel)
// draw differently from the same engine, so `zeus simulate` would print other numbers from a
// wheel. std::mt19937_64 itself is fully specified; these functions turn its output into draws
// by fixed algorithms. uniform_index and normal are the algorithms libstdc++ uses for a 64-bit
// engine (Lemire's nearly divisionless method; Marsaglia's polar method over a 53-bit
// canonical double), so the source build's recorded numbers (README, bench/) are unchanged;
// tests/common_test.cpp holds them to libstdc++'s draws.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace zeus {

// GCC's and clang's 128-bit integer (__extension__: -Wpedantic knows it is one).
__extension__ using Uint128 = unsigned __int128;

// A uniform integer in [0, n), n >= 1.
inline uint64_t uniform_index(std::mt19937_64& rng, uint64_t n) {
  Uint128 product = static_cast<Uint128>(rng()) * n;
  auto low = static_cast<uint64_t>(product);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      product = static_cast<Uint128>(rng()) * n;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

// A uniform double in [0, 1) from one draw.
inline double canonical(std::mt19937_64& rng) {
  const double r = static_cast<double>(rng()) / 18446744073709551616.0;  // 2^64
  return r >= 1.0 ? std::nextafter(1.0, 0.0) : r;
}

// A draw from N(mean, sd^2) (one pair of the polar method; its second value is not kept).
inline double normal(std::mt19937_64& rng, double mean, double sd) {
  double x = 0;
  double y = 0;
  double r2 = 0;
  do {
    x = 2.0 * canonical(rng) - 1.0;
    y = 2.0 * canonical(rng) - 1.0;
    r2 = x * x + y * y;
  } while (r2 > 1.0 || r2 == 0.0);
  const double mult = std::sqrt(-2 * std::log(r2) / r2);
  const double z = y * mult;
  return z * sd + mean;
}

// Fisher-Yates over [first, last) with uniform_index.
template <typename It>
void shuffle(It first, It last, std::mt19937_64& rng) {
  const auto n = static_cast<uint64_t>(last - first);
  for (uint64_t i = n; i > 1; --i) {
    using std::swap;
    swap(first[i - 1], first[uniform_index(rng, i)]);
  }
}

}  // namespace zeus
