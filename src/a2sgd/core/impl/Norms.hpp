#pragma once
// Norms of a float buffer in double precision, at memory speed, into a View (internal).

#include <a2sgd/core/Types.hpp>

namespace a2sgd::detail {

/// total() = sum_i |x_i| in double (EF-sign's scale).
void l1_norm(const ExecutionSpace& exec, const ConstFloatView& x, const Kokkos::View<double, MemorySpace>& total);

/// total() = sum_i x_i^2 in double (QSGD's norm, squared).
void squared_norm(const ExecutionSpace& exec, const ConstFloatView& x, const Kokkos::View<double, MemorySpace>& total);

}  // namespace a2sgd::detail
