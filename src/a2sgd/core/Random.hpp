#pragma once
/// @file Random.hpp
/// A reproducible host random stream: mt19937_64 (fully specified by the standard) with our own
/// uniform and normal transforms, so the same seed gives the same model initialisation, data and
/// shuffles with every standard library.

#include <cmath>
#include <cstdint>
#include <random>

namespace a2sgd {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : m_engine(seed) {}

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(m_engine() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n) (n > 0); the modulo bias is below 2^-40 for n < 2^24.
  std::uint64_t below(std::uint64_t n) { return m_engine() % n; }

  /// Standard normal (Box-Muller, one value per call).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 m_engine;
};

/// A seed derived from a base seed and a stream id (e.g. rank, epoch): splitmix64 mixing.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace a2sgd
