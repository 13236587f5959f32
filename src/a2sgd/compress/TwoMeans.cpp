#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include <cmath>

#include <string>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

// Branch-free accumulation of one entry. Gradient signs are close to random, so a branch per
// entry would be mispredicted about half the time; 0/1 masks multiply instead. Non-finite entries
// need no test: NaN * 0 and Inf * 0 are NaN, so a NaN or +-Inf entry makes a double sum
// non-finite (finite float32 values cannot overflow one), and only then a second pass counts them.
template <class Count>
KOKKOS_FORCEINLINE_FUNCTION void accumulate(float a, double& sum_pos, double& sum_neg, Count& count_pos,
                                            Count& count_neg) {
  const int pos = a > 0.0f;
  const int neg = a < 0.0f;
  sum_pos += static_cast<double>(a * static_cast<float>(pos));
  sum_neg += static_cast<double>(a * static_cast<float>(neg));
  count_pos += pos;
  count_neg += neg;
}

// One block's sums on the host, a plain function over raw pointers so that it can be compiled
// for several ISAs (impl/HostClones.hpp): AVX2 and AVX-512 convert and add 4 and 8 doubles per
// instruction instead of 2.
template <bool ErrorFeedback>
A2SGD_HOST_CLONES void block_sums(const float* g, const float* e, Index count, double& sum_pos, double& sum_neg,
                                  std::int64_t& count_pos, std::int64_t& count_neg) {
  double sp = 0.0, sn = 0.0;
  int cp = 0, cn = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : sp, sn, cp, cn)
#endif
  for (Index i = 0; i < count; ++i) accumulate(ErrorFeedback ? g[i] + e[i] : g[i], sp, sn, cp, cn);
  sum_pos += sp;
  sum_neg += sn;
  count_pos += cp;
  count_neg += cn;
}

// Host backends: one work item is a contiguous block. Its loop is a SIMD reduction: a single
// double accumulator chain would bound the pass by the latency of a double add instead of memory
// bandwidth. With GCC/Clang the build passes -fopenmp-simd (A2SGD_OMP_SIMD) and the compiler keeps
// one accumulator per vector lane; otherwise four explicit lanes break the chain.
template <bool ErrorFeedback>
struct TwoMeansBlocked {
  static constexpr Index block = 4096;
  static constexpr int lanes = 4;

  ConstFloatView g;
  ConstFloatView e;
  Index n;

  KOKKOS_INLINE_FUNCTION float value(Index i) const { return ErrorFeedback ? g(i) + e(i) : g(i); }

  KOKKOS_INLINE_FUNCTION void operator()(Index b, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    const Index begin = b * block;
    const Index end = begin + block < n ? begin + block : n;
#ifdef A2SGD_OMP_SIMD
    block_sums<ErrorFeedback>(g.data() + begin, ErrorFeedback ? e.data() + begin : nullptr, end - begin, sum_pos,
                              sum_neg, count_pos, count_neg);
#else
    double sp[lanes] = {};
    double sn[lanes] = {};
    int cp[lanes] = {};
    int cn[lanes] = {};
    Index i = begin;
    for (; i + lanes <= end; i += lanes)
      for (int k = 0; k < lanes; ++k) accumulate(value(i + k), sp[k], sn[k], cp[k], cn[k]);
    for (; i < end; ++i) accumulate(value(i), sp[0], sn[0], cp[0], cn[0]);
    for (int k = 0; k < lanes; ++k) {
      sum_pos += sp[k];
      sum_neg += sn[k];
      count_pos += cp[k];
      count_neg += cn[k];
    }
#endif
  }
};

// GPU backends: one entry per thread, so consecutive threads read consecutive addresses.
template <bool ErrorFeedback>
struct TwoMeansElementwise {
  ConstFloatView g;
  ConstFloatView e;

  KOKKOS_INLINE_FUNCTION void operator()(Index i, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    accumulate(ErrorFeedback ? g(i) + e(i) : g(i), sum_pos, sum_neg, count_pos, count_neg);
  }
};

// Error path only: how many entries of a are NaN or +-Inf.
template <bool ErrorFeedback>
struct CountNonFinite {
  ConstFloatView g;
  ConstFloatView e;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, std::int64_t& count) const {
    count += detail::non_finite(ErrorFeedback ? g(i) + e(i) : g(i));
  }
};

template <bool ErrorFeedback>
TwoMeansResult run(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
  const auto n = static_cast<Index>(g.extent(0));
  TwoMeansResult r;
  if (n == 0) return r;
  if constexpr (host_backend) {
    using Blocked = TwoMeansBlocked<ErrorFeedback>;
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::two_means"),
                            Policy(exec, 0, (n + Blocked::block - 1) / Blocked::block), Blocked{g, e, n}, r.sum_pos,
                            r.sum_neg, r.count_pos, r.count_neg);
  } else {
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::two_means"), Policy(exec, 0, n),
                            TwoMeansElementwise<ErrorFeedback>{g, e}, r.sum_pos, r.sum_neg, r.count_pos, r.count_neg);
  }
  if (!std::isfinite(r.sum_pos) || !std::isfinite(r.sum_neg)) {
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::count_non_finite"), Policy(exec, 0, n),
                            CountNonFinite<ErrorFeedback>{g, e}, r.non_finite);
  }
  return r;
}

}  // namespace

TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
  if (e.extent(0) == 0) return run<false>(exec, g, e);
  if (e.extent(0) != g.extent(0))
    throw InvalidArgument("two_means: gradient has " + std::to_string(g.extent(0)) + " values, residual " +
                          std::to_string(e.extent(0)));
  return run<true>(exec, g, e);
}

}  // namespace a2sgd
