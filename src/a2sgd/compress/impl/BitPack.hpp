#pragma once
// Fixed-width bit fields packed into a stream of 32-bit words (internal).
//
// Field i of width b occupies stream bits [i b, i b + b); stream bit j is bit (j mod 32) of word
// j / 32. 32 fields fill exactly b words, so a kernel works per group of 32 fields: no atomics,
// no division per field, and each field is produced once.

#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd::compress::impl {

/// Words needed for n fields of `bits` bits (1 <= bits <= 32).
KOKKOS_INLINE_FUNCTION Index packed_words(Index n, int bits) {
  return (n * bits + 31) / 32;
}

KOKKOS_INLINE_FUNCTION std::uint64_t field_mask(int bits) {
  return (std::uint64_t(1) << bits) - 1u;
}

/// Groups of 32 fields: group grp holds fields [32 grp, 32 grp + 32) and occupies exactly
/// `bits` whole words from word offset + grp * bits (the last group may be shorter).
KOKKOS_INLINE_FUNCTION Index packed_groups(Index n) {
  return (n + 31) / 32;
}

/// Fields in group grp of a stream of n (32 but for the last group).
KOKKOS_INLINE_FUNCTION int group_size(Index grp, Index n) {
  return static_cast<int>(grp * 32 + 32 < n ? 32 : n - grp * 32);
}

/// Writes group grp of the stream of n fields into words(offset + grp * bits, ...); field(i)
/// gives field i (below 2^bits).
template <class Words, class Field>
KOKKOS_INLINE_FUNCTION void pack_group(const Words& words, Index offset, Index grp, Index n, int bits,
                                       const Field& field) {
  const Index begin = grp * 32;
  const Index end = begin + group_size(grp, n);
  Index w = offset + grp * bits;
  std::uint64_t acc = 0;
  int filled = 0;
  for (Index i = begin; i < end; ++i) {
    acc |= static_cast<std::uint64_t>(field(i)) << filled;
    filled += bits;
    if (filled >= 32) {
      words(w++) = static_cast<std::uint32_t>(acc);
      acc >>= 32;
      filled -= 32;
    }
  }
  if (filled > 0) words(w) = static_cast<std::uint32_t>(acc);
}

/// Reads group grp back: visit(j, field) for j = 0 .. (fields in the group) - 1, in order.
template <class Words, class Visit>
KOKKOS_INLINE_FUNCTION void unpack_group(const Words& words, Index offset, Index grp, Index n, int bits,
                                         const Visit& visit) {
  const int count = group_size(grp, n);
  const std::uint64_t mask = field_mask(bits);
  Index w = offset + grp * bits;
  std::uint64_t acc = 0;
  int have = 0;
  for (int j = 0; j < count; ++j) {
    if (have < bits) {
      acc |= static_cast<std::uint64_t>(words(w++)) << have;
      have += 32;
    }
    visit(j, static_cast<std::uint32_t>(acc & mask));
    acc >>= bits;
    have -= bits;
  }
}

/// u(32 grp + j) = factor * sum[j] for the fields of group grp: the decoders' last step.
template <class Out>
KOKKOS_INLINE_FUNCTION void store_group(const Out& u, Index grp, Index n, const float* sum, float factor) {
  const int count = group_size(grp, n);
  for (int j = 0; j < count; ++j) u(grp * 32 + j) = sum[j] * factor;
}

/// Bit j of a 32-bit word, from a table: a SIMD loop that ORs `cond ? lane_bit[j] : 0` into one
/// word vectorises, where GCC 12 left the per-lane shift `cond << j` in an OR reduction scalar.
alignas(64) inline constexpr std::uint32_t lane_bit[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,  1u << 8,  1u << 9,  1u << 10,
    1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15, 1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21,
    1u << 22, 1u << 23, 1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

/// A 32-bit mixer (multiply-xorshift, bijective): vectorises with 32-bit lane multiplies.
KOKKOS_INLINE_FUNCTION std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/// Counter-based uniform random number in [0, 1) with 24 random bits: the same (key, i) gives the
/// same value in any kernel on any backend, and no generator state is carried between steps.
KOKKOS_INLINE_FUNCTION float counter_uniform(std::uint64_t key, std::uint64_t i) {
  const std::uint32_t h = mix32(mix32(static_cast<std::uint32_t>(i) ^ static_cast<std::uint32_t>(key)) ^
                                static_cast<std::uint32_t>(i >> 32) ^ static_cast<std::uint32_t>(key >> 32));
  return static_cast<float>(h >> 8) * 0x1.0p-24f;
}

}  // namespace a2sgd::compress::impl
