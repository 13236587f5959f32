#pragma once
// Exact Top-K selection on the execution space, without sorting and without the host (internal).

#include <a2sgd/core/Types.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace a2sgd::compress::impl {

/// Selects the k entries of largest magnitude (ties: the lower index), with one of two algorithms
/// that return the same selection:
///
/// - `radix` (the default on device backends): radix select on the magnitudes' IEEE bit patterns,
///   which order like the magnitudes. Three histogram passes narrow the k-th largest pattern T
///   down (bits 30-20, 19-8, 7-0, each pass counting only the entries that share the digits found
///   so far), and one scan writes every entry above T and the first `k - (entries above T)`
///   entries equal to T, in ascending index order. Four passes over the data, a fixed number of
///   kernels, and nothing read back by the host: the threshold lives in a device View.
/// - `sampled` (the default on host backends, where the host reads device memory for free): a
///   strided sample of 16,384 magnitudes gives a threshold expected to admit about 2k entries, one
///   pass counts the entries above it (the threshold is lowered or raised and counted again in
///   the rare case the count falls outside [k, 8k]), one scan pass compacts them, and the exact
///   k among those candidates are selected on the host. Two to three passes over the data, each
///   of them vectorised: about twice as fast as `radix` on a CPU, whose histogram increments do
///   not vectorise.
///
/// Neither allocates after the first calls (the sampled candidate buffers grow to the largest
/// candidate count seen). A chosen entry is written as (index << 32) | (float bits of its value):
/// one word per entry for the all-gather of index/value pairs. NaN magnitudes order above every
/// number.
class TopkSelector {
 public:
  using Words = Kokkos::View<std::uint64_t*, MemorySpace>;
  using Count = Kokkos::View<std::int64_t, MemorySpace>;
  enum class Algorithm { automatic, radix, sampled };

  TopkSelector() = default;
  /// Buffers for selecting `k` entries (k >= 1) from n values.
  TopkSelector(Index k, Index n, Algorithm algorithm = Algorithm::automatic);

  /// The algorithm this selector runs (`automatic` resolved for the backend).
  Algorithm algorithm() const noexcept { return m_algorithm; }

  Index k() const noexcept { return m_k; }

  /// e <- g + e (the error-compensated gradient, counting its non-finite entries into
  /// `non_finite`), then selects from e: out(0 .. k) receives the chosen entries and they are
  /// zeroed in e (what is sent leaves the residual). e.extent(0) must be below 2^32.
  void fold_and_select(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e, const Count& non_finite,
                       const Words& out);

  /// Selects from a without changing it.
  void select(const ExecutionSpace& exec, const ConstFloatView& a, const Words& out);

 private:
  // The sampled algorithm's host part: the chosen indices, ascending, into m_chosen.
  void choose_sampled(const ExecutionSpace& exec, const ConstFloatView& a);

  Index m_k = 0;
  Algorithm m_algorithm = Algorithm::radix;
  // radix
  Kokkos::View<std::int64_t*, MemorySpace> m_histogram;  // 4096 bins: the widest digit
  Kokkos::View<std::int64_t*, MemorySpace> m_state;      // digits found so far, entries still to take
  // sampled
  Kokkos::View<float*, MemorySpace> m_sample;
  Kokkos::View<float*, MemorySpace>::HostMirror m_host_sample;
  std::vector<float> m_sorted_sample;
  Kokkos::View<Index*, MemorySpace> m_candidates;
  Kokkos::View<float*, MemorySpace> m_magnitudes;
  Kokkos::View<Index*, MemorySpace>::HostMirror m_host_candidates;
  Kokkos::View<float*, MemorySpace>::HostMirror m_host_magnitudes;
  std::vector<std::pair<float, Index>> m_keyed;
  Kokkos::View<std::int64_t*, MemorySpace> m_block_counts;  // host backends: per-block counts, then offsets
  Kokkos::View<Index*, MemorySpace> m_chosen;
  Kokkos::View<Index*, MemorySpace>::HostMirror m_host_chosen;
};

}  // namespace a2sgd::compress::impl
