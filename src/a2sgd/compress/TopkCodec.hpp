#pragma once
/// @file TopkCodec.hpp
/// Top-K's compress and decompress passes without a communicator or an optimizer, for a caller
/// that all-gathers the payload with its own collective (the PyTorch hooks in python/), and for
/// TopkExchange itself: one implementation of the method's kernels.

#include <a2sgd/compress/GatherCodec.hpp>
#include <a2sgd/compress/impl/TopkSelect.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd {

/// k = max(1, min(n, round(ratio n))). Throws InvalidArgument for a ratio outside (0, 1] and for
/// n >= 2^32 (the payload's indices are 32-bit).
Index topk_k(double ratio, Index n);

/// One rank's Top-K of a buffer of n values with error feedback, a gather codec (GatherCodec.hpp).
/// A payload is k words, each (index << 32) | (float32 bits of the value): what a rank all-gathers
/// (8 k bytes).
class TopkCodec {
 public:
  using Word = std::uint64_t;
  using Words = Kokkos::View<Word*, MemorySpace>;
  static constexpr bool has_residual = true;
  static constexpr bool decode_overwrites = false;  // adds the k p pairs into a zero u

  TopkCodec() = default;
  /// Buffers to select k of n values (allocated here, never in encode()).
  TopkCodec(Index n, Index k);

  Index size() const noexcept { return m_n; }
  Index k() const noexcept { return m_selector.k(); }
  Index payload_words() const noexcept { return k(); }

  /// e <- a = g + e, then payload(0 .. k) <- the k entries of largest |a| (ties: lower index
  /// first) in ascending index order, which leave e. The non-finite entries of a are added to
  /// context.non_finite; if it is then positive, payload(0)'s value is NaN, so that every rank sees
  /// it after the all-gather.
  void encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e, const EncodeContext& context,
              const Words& payload);

  /// u(index) += value / p for every pair in `gathered` (p ranks' payloads, one after the other;
  /// pairs of different ranks may share an index: atomic adds). u must be zero on entry.
  void decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const;
  /// u(index) = 0 for every pair in `gathered`: undoes decode's footprint in O(k p), not O(n).
  void clear(const ExecutionSpace& exec, const Words& gathered, const FloatView& u) const;

 private:
  Index m_n = 0;
  compress::impl::TopkSelector m_selector;
};

}  // namespace a2sgd
