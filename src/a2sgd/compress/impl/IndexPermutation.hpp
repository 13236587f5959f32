#pragma once
// A keyed pseudo-random permutation of [0, n), evaluated independently per index (internal).

#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd::compress::impl {

/// A 64-bit mixer (splitmix64's finaliser, bijective).
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// pi(0), pi(1), ..., pi(n - 1) is a pseudo-random ordering of [0, n) fixed by `key`, and each pi(j)
/// is computed on its own: k distinct random indices are pi(0 .. k) in k independent work items,
/// on any backend, identical on every rank that uses the same key. A balanced Feistel network of
/// 6 rounds permutes [0, 4^h) for the smallest 4^h >= n, and values that land at n or above are
/// permuted again until they fall inside ("cycle walking", which keeps it a permutation of
/// [0, n)); since 4^h < 4n, that takes fewer than 4 rounds on average.
class IndexPermutation {
 public:
  KOKKOS_INLINE_FUNCTION IndexPermutation(std::uint64_t key, std::uint64_t n) : m_n(n) {
    while ((std::uint64_t(1) << (2 * m_half_bits)) < n && m_half_bits < 31) ++m_half_bits;
    m_half_mask = (std::uint64_t(1) << m_half_bits) - 1u;
    for (int round = 0; round < rounds; ++round) m_round_key[round] = mix64(key + static_cast<std::uint64_t>(round));
  }

  KOKKOS_INLINE_FUNCTION std::uint64_t operator()(std::uint64_t j) const {
    std::uint64_t x = once(j);
    while (x >= m_n) x = once(x);
    return x;
  }

 private:
  KOKKOS_INLINE_FUNCTION std::uint64_t once(std::uint64_t x) const {
    std::uint64_t left = x >> m_half_bits, right = x & m_half_mask;
    for (int round = 0; round < rounds; ++round) {
      const std::uint64_t f = mix64(right ^ m_round_key[round]) & m_half_mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return (left << m_half_bits) | right;
  }

  static constexpr int rounds = 6;
  std::uint64_t m_round_key[rounds] = {};
  std::uint64_t m_n;
  int m_half_bits = 0;
  std::uint64_t m_half_mask = 0;
};

}  // namespace a2sgd::compress::impl
