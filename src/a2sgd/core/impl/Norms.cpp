#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Norms.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

namespace a2sgd::detail {
namespace {

constexpr Index block = 4096;

// One block's sum on the host: plain functions over raw pointers compiled per ISA
// (impl/HostClones.hpp). Generic Kokkos lambdas are not enough: inlined into the OpenMP backend's
// parallel region GCC 12 left the same loop scalar with one accumulator chain (the squared norm of
// 16M values took 11.5 ms instead of 3.3 ms). 32 double accumulators, entry i adding to lane
// i mod 32: every ISA's clone sums in the same order (a float's square is exact in double, so a
// fused multiply-add changes nothing). Software prefetch per 32-entry chunk (impl/Prefetch.hpp).
A2SGD_HOST_CLONES double block_abs_sum(const float* x, Index count) {
  double lane[32] = {};
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    a2sgd::impl::prefetch_chunk(x + i);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < 32; ++j) lane[j] += static_cast<double>(detail::abs(x[i + j]));
  }
  for (int j = 0; i < count; ++i, ++j) lane[j] += static_cast<double>(detail::abs(x[i]));
  double acc = 0.0;
  for (int j = 0; j < 32; ++j) acc += lane[j];
  return acc;
}

A2SGD_HOST_CLONES double block_square_sum(const float* x, Index count) {
  double lane[32] = {};
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    a2sgd::impl::prefetch_chunk(x + i);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < 32; ++j) lane[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  }
  for (int j = 0; i < count; ++i, ++j) lane[j] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  double acc = 0.0;
  for (int j = 0; j < 32; ++j) acc += lane[j];
  return acc;
}

template <bool Square>
void norm(const ExecutionSpace& exec, const std::string& label, const ConstFloatView& x,
          const Kokkos::View<double, MemorySpace>& total) {
  const auto n = static_cast<Index>(x.extent(0));
  if constexpr (host_backend) {
    Kokkos::parallel_reduce(
        label, Policy(exec, 0, (n + block - 1) / block),
        [=](Index b, double& s) {
          const Index begin = b * block;
          const Index count = begin + block < n ? block : n - begin;
          s += Square ? block_square_sum(x.data() + begin, count) : block_abs_sum(x.data() + begin, count);
        },
        total);
  } else {
    Kokkos::parallel_reduce(
        label, Policy(exec, 0, n),
        KOKKOS_LAMBDA(Index i, double& s) {
          const auto v = static_cast<double>(x(i));
          s += Square ? v * v : (v < 0.0 ? -v : v);
        },
        total);
  }
}

}  // namespace

void l1_norm(const ExecutionSpace& exec, const ConstFloatView& x, const Kokkos::View<double, MemorySpace>& total) {
  norm<false>(exec, A2SGD_LABEL("a2sgd::compress::l1_norm"), x, total);
}

void squared_norm(const ExecutionSpace& exec, const ConstFloatView& x, const Kokkos::View<double, MemorySpace>& total) {
  norm<true>(exec, A2SGD_LABEL("a2sgd::compress::squared_norm"), x, total);
}

}  // namespace a2sgd::detail
