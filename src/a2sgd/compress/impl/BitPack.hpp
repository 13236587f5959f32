#pragma once
// Fixed-width bit fields packed into a stream of 32-bit words (internal).
//
// Field i of width b occupies stream bits [i b, i b + b); stream bit j is bit (j mod 32) of word
// j / 32. Packing is written per output word (each word gathers the fields that overlap it), so
// a kernel over words needs no atomics; a field that straddles two words is produced twice.

#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd::compress::impl {

/// Words needed for n fields of `bits` bits (1 <= bits <= 32).
KOKKOS_INLINE_FUNCTION Index packed_words(Index n, int bits) { return (n * bits + 31) / 32; }

KOKKOS_INLINE_FUNCTION std::uint64_t field_mask(int bits) { return (std::uint64_t(1) << bits) - 1u; }

/// Word w of the stream of n fields, field(i) giving field i (only its low `bits` bits are used).
template <class Field>
KOKKOS_INLINE_FUNCTION std::uint32_t pack_word(Index w, Index n, int bits, const Field& field) {
  const Index first = w * 32;
  const Index begin = first / bits;
  const Index stop = (first + 32 + bits - 1) / bits;
  const Index end = stop < n ? stop : n;
  const std::uint64_t mask = field_mask(bits);
  std::uint32_t word = 0;
  for (Index i = begin; i < end; ++i) {
    const std::uint64_t v = static_cast<std::uint64_t>(field(i)) & mask;
    const Index pos = i * bits - first;  // in (-bits, 32)
    word |= pos >= 0 ? static_cast<std::uint32_t>(v << pos) : static_cast<std::uint32_t>(v >> (-pos));
  }
  return word;
}

/// Field i of a stream stored in words(offset), words(offset + 1), ...
template <class Words>
KOKKOS_INLINE_FUNCTION std::uint32_t unpack_field(const Words& words, Index offset, Index i, int bits) {
  const Index bit = i * bits;
  const Index w = offset + bit / 32;
  const int shift = static_cast<int>(bit % 32);
  std::uint64_t v = words(w);
  if (shift + bits > 32) v |= static_cast<std::uint64_t>(words(w + 1)) << 32;
  return static_cast<std::uint32_t>((v >> shift) & field_mask(bits));
}

/// Counter-based uniform random number in [0, 1) with 24 random bits: the same (key, i) gives the
/// same value in any kernel on any backend, and no generator state is carried between steps.
KOKKOS_INLINE_FUNCTION float counter_uniform(std::uint64_t key, std::uint64_t i) {
  std::uint64_t z = key + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

}  // namespace a2sgd::compress::impl
