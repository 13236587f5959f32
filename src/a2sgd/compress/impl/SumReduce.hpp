#pragma once
// Sum of a per-entry term in double, at memory speed (internal).
//
// On host backends one work item is a contiguous block whose loop is a SIMD reduction: a single
// double accumulator chain would bound the pass by the latency of a double add rather than by
// memory bandwidth (docs/design.md). GPU backends take one entry per thread.

#include <a2sgd/core/Types.hpp>

#include <string>

namespace a2sgd::compress::impl {

/// sum_{i < n} term(i) in double into `total` (a View on the execution space's memory: the host
/// does not wait for it on a device backend).
template <class Term>
void sum_reduce(const ExecutionSpace& exec, const std::string& label, Index n, const Term& term,
                const Kokkos::View<double, MemorySpace>& total) {
  using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
  constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
  if constexpr (host_backend) {
    constexpr Index block = 4096;
    Kokkos::parallel_reduce(
        label, Policy(exec, 0, (n + block - 1) / block),
        KOKKOS_LAMBDA(Index b, double& s) {
          const Index begin = b * block;
          const Index end = begin + block < n ? begin + block : n;
#ifdef A2SGD_OMP_SIMD
          double acc = 0.0;
#pragma omp simd reduction(+ : acc)
          for (Index i = begin; i < end; ++i) acc += static_cast<double>(term(i));
          s += acc;
#else
          double acc[4] = {};
          Index i = begin;
          for (; i + 4 <= end; i += 4)
            for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(term(i + k));
          for (; i < end; ++i) acc[0] += static_cast<double>(term(i));
          s += (acc[0] + acc[1]) + (acc[2] + acc[3]);
#endif
        },
        total);
  } else {
    Kokkos::parallel_reduce(
        label, Policy(exec, 0, n), KOKKOS_LAMBDA(Index i, double& s) { s += static_cast<double>(term(i)); }, total);
  }
}

}  // namespace a2sgd::compress::impl
