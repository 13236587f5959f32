#pragma once
/// @file TopkCodec.hpp
/// Top-K's compress and decompress passes without a communicator or an optimizer, for a caller
/// that all-gathers the payload with its own collective (the PyTorch hooks in python/), and for
/// TopkExchange itself: one implementation of the method's kernels.

#include <a2sgd/compress/impl/TopkSelect.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd {

/// k = max(1, min(n, round(ratio n))). Throws InvalidArgument for a ratio outside (0, 1] and for
/// n >= 2^32 (the payload's indices are 32-bit).
Index topk_k(double ratio, Index n);

/// One rank's Top-K of a buffer of n values with error feedback. A payload is k words, each
/// (index << 32) | (float32 bits of the value): what a rank all-gathers (8 k bytes).
class TopkCodec {
 public:
  using Words = Kokkos::View<std::uint64_t*, MemorySpace>;
  using Count = Kokkos::View<std::int64_t, MemorySpace>;

  TopkCodec() = default;
  /// Buffers to select k of n values (allocated here, never in encode()).
  TopkCodec(Index n, Index k);

  Index size() const noexcept { return m_n; }
  Index k() const noexcept { return m_selector.k(); }

  /// e <- a = g + e, then payload(0 .. k) <- the k entries of largest |a| (ties: lower index
  /// first) in ascending index order, which leave e. The non-finite entries of a are added to
  /// `non_finite`; if it is then positive, payload(0)'s value is NaN, so that every rank sees it
  /// after the all-gather.
  void encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e, const Count& non_finite,
              const Words& payload);

  /// u(index) += scale value for every pair in `gathered` (any number of ranks' payloads, one
  /// after the other; pairs of different ranks may share an index: atomic adds).
  static void decode_add(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, float scale);
  /// u(index) = 0 for every pair in `gathered`: undoes decode_add's footprint in O(pairs), not O(n).
  static void clear(const ExecutionSpace& exec, const Words& gathered, const FloatView& u);

 private:
  Index m_n = 0;
  compress::impl::TopkSelector m_selector;
};

}  // namespace a2sgd
