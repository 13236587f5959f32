#pragma once
// Shared by the error-feedback sparsifiers (internal).

#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd::compress::impl {

/// e <- g + e (the residual then holds a, the error-compensated gradient), in one pass that also
/// counts the non-finite entries of a into `bad` (on the device: the host does not wait for it).
inline void fold_into_residual(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                               const Kokkos::View<std::int64_t, MemorySpace>& bad) {
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::compress::fold_residual"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(e.extent(0))),
      KOKKOS_LAMBDA(Index i, std::int64_t & b) {
        const float a = g(i) + e(i);
        e(i) = a;
        b += a2sgd::detail::non_finite(a);
      },
      bad);
}

}  // namespace a2sgd::compress::impl
