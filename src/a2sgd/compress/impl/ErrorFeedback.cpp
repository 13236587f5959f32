#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

namespace a2sgd::compress::impl {
namespace {

constexpr Index block = 4096;

// e += g over one block, returning how many sums are not finite (32-bit: a block is small).
A2SGD_HOST_CLONES std::int32_t fold_block(const float* g, float* e, Index count) {
  std::int32_t bad = 0;
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    a2sgd::impl::prefetch_chunk(g + i);
    a2sgd::impl::prefetch_chunk<true>(e + i);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : bad)
#endif
    for (Index j = i; j < i + 32; ++j) {
      const float a = g[j] + e[j];
      e[j] = a;
      bad += a2sgd::detail::non_finite(a);
    }
  }
  for (; i < count; ++i) {
    const float a = g[i] + e[i];
    e[i] = a;
    bad += a2sgd::detail::non_finite(a);
  }
  return bad;
}

}  // namespace

void fold_into_residual(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                        const Kokkos::View<std::int64_t, MemorySpace>& bad) {
  const auto n = static_cast<Index>(e.extent(0));
  if constexpr (host_backend) {
    Kokkos::parallel_reduce(
        A2SGD_LABEL("a2sgd::compress::fold_residual"), Policy(exec, 0, (n + block - 1) / block),
        [=](Index b, std::int64_t& s) {
          const Index begin = b * block;
          s += fold_block(g.data() + begin, e.data() + begin, begin + block < n ? block : n - begin);
        },
        bad);
  } else {
    Kokkos::parallel_reduce(
        A2SGD_LABEL("a2sgd::compress::fold_residual"), Policy(exec, 0, n),
        KOKKOS_LAMBDA(Index i, std::int64_t & s) {
          const float a = g(i) + e(i);
          e(i) = a;
          s += a2sgd::detail::non_finite(a);
        },
        bad);
  }
}

}  // namespace a2sgd::compress::impl
