#pragma once
// Kokkos Kernels GEMM on the caller's execution-space instance, on Kokkos Kernels 3.x and 4.x
// (internal).

#include <a2sgd/core/Types.hpp>

#include <KokkosBlas3_gemm.hpp>

namespace a2sgd::detail {

/// C = alpha op(A) op(B) + beta C, queued on `exec` (Kokkos Kernels 4.x takes the instance; it
/// maps to cuBLAS/rocBLAS/BLAS with that instance's stream).
template <class A, class B, class C>
void gemm(const ExecutionSpace& exec, const char* trans_a, const char* trans_b, float alpha, const A& a, const B& b,
          float beta, const C& c) {
#if defined(KOKKOSKERNELS_VERSION_MAJOR) && KOKKOSKERNELS_VERSION_MAJOR >= 4
  KokkosBlas::gemm(exec, trans_a, trans_b, alpha, a, b, beta, c);
#else
  // Kokkos Kernels 3.x runs its GEMM on the default instance: order it after the caller's work
  // and the caller's later work after it (on host backends both fences return at once).
  exec.fence();
  KokkosBlas::gemm(trans_a, trans_b, alpha, a, b, beta, c);
  ExecutionSpace().fence();
#endif
}

}  // namespace a2sgd::detail
