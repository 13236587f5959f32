#pragma once
// Exact Top-K selection on the execution space, without sorting and without the host (internal).

#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd::compress::impl {

/// Selects the k entries of largest magnitude (ties: the lower index) by radix select on the
/// magnitudes' IEEE bit patterns, which order like the magnitudes: three histogram passes narrow
/// the k-th largest pattern T down (bits 30-20, 19-8, 7-0, each pass counting only the entries
/// that share the digits found so far), and one scan writes every entry above T and the first
/// `k - (entries above T)` entries equal to T, in ascending index order. Four passes over the
/// data, a fixed number of kernels, no allocation after construction, and nothing read back by
/// the host: the threshold lives in a device View between the passes.
///
/// A chosen entry is written as (index << 32) | (float bits of its value): one word per entry for
/// the all-gather of index/value pairs. NaN magnitudes order above every number.
class TopkSelector {
 public:
  using Words = Kokkos::View<std::uint64_t*, MemorySpace>;
  using Count = Kokkos::View<std::int64_t, MemorySpace>;

  TopkSelector() = default;
  /// Buffers for selecting `k` entries (k >= 1).
  explicit TopkSelector(Index k);

  Index k() const noexcept { return m_k; }

  /// e <- g + e (the error-compensated gradient, counting its non-finite entries into
  /// `non_finite`), then selects from e: out(0 .. k) receives the chosen entries and they are
  /// zeroed in e (what is sent leaves the residual). e.extent(0) must be below 2^32.
  void fold_and_select(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e, const Count& non_finite,
                       const Words& out) const;

  /// Selects from a without changing it.
  void select(const ExecutionSpace& exec, const ConstFloatView& a, const Words& out) const;

 private:
  template <bool Fold, class Data>
  void run(const ExecutionSpace& exec, const ConstFloatView& g, const Data& e, const Count& non_finite,
           const Words& out) const;

  Index m_k = 0;
  Kokkos::View<std::int64_t*, MemorySpace> m_histogram;  // 4096 bins: the widest digit
  Kokkos::View<std::int64_t*, MemorySpace> m_state;      // digits found so far, entries still to take
};

}  // namespace a2sgd::compress::impl
