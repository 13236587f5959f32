#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Math.hpp>

#include <cmath>

#include <string>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

// Non-finite entries need no test in the hot loop: a NaN or +-Inf entry lands in one of the
// double sums and makes it non-finite (finite float32 values cannot overflow a double sum), and
// only then a second pass counts them.
//
// Host backends: one work item is a contiguous block read through `lanes` independent
// accumulator sets. A single accumulator chain would bound the pass by the latency of a double
// add instead of memory bandwidth; four lanes let the compiler interleave (and vectorise) them
// without spilling registers on baseline x86-64.
template <bool ErrorFeedback>
struct TwoMeansBlocked {
  static constexpr int lanes = 4;
  static constexpr Index block = 4096;

  ConstFloatView g;
  ConstFloatView e;
  Index n;

  KOKKOS_INLINE_FUNCTION float value(Index i) const { return ErrorFeedback ? g(i) + e(i) : g(i); }

  KOKKOS_INLINE_FUNCTION void operator()(Index b, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    const Index begin = b * block;
    const Index end = begin + block < n ? begin + block : n;
    double sp[lanes] = {};
    double sn[lanes] = {};
    int cp[lanes] = {};
    int cn[lanes] = {};
    Index i = begin;
    for (; i + lanes <= end; i += lanes) {
      for (int k = 0; k < lanes; ++k) {
        const float a = value(i + k);
        const bool neg = a < 0.0f;
        sp[k] += static_cast<double>(neg ? 0.0f : a);  // NaN goes here and poisons the sum
        sn[k] += static_cast<double>(neg ? a : 0.0f);
        cp[k] += a > 0.0f;
        cn[k] += neg;
      }
    }
    for (; i < end; ++i) {
      const float a = value(i);
      const bool neg = a < 0.0f;
      sp[0] += static_cast<double>(neg ? 0.0f : a);
      sn[0] += static_cast<double>(neg ? a : 0.0f);
      cp[0] += a > 0.0f;
      cn[0] += neg;
    }
    for (int k = 0; k < lanes; ++k) {
      sum_pos += sp[k];
      sum_neg += sn[k];
      count_pos += cp[k];
      count_neg += cn[k];
    }
  }
};

// GPU backends: one entry per thread, so consecutive threads read consecutive addresses.
template <bool ErrorFeedback>
struct TwoMeansElementwise {
  ConstFloatView g;
  ConstFloatView e;

  KOKKOS_INLINE_FUNCTION void operator()(Index i, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    const float a = ErrorFeedback ? g(i) + e(i) : g(i);
    const bool neg = a < 0.0f;
    sum_pos += static_cast<double>(neg ? 0.0f : a);
    sum_neg += static_cast<double>(neg ? a : 0.0f);
    count_pos += a > 0.0f;
    count_neg += neg;
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
  constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
  if constexpr (host_backend) {
    using Blocked = TwoMeansBlocked<ErrorFeedback>;
    Kokkos::parallel_reduce("a2sgd::compress::two_means", Policy(exec, 0, (n + Blocked::block - 1) / Blocked::block),
                            Blocked{g, e, n}, r.sum_pos, r.sum_neg, r.count_pos, r.count_neg);
  } else {
    Kokkos::parallel_reduce("a2sgd::compress::two_means", Policy(exec, 0, n), TwoMeansElementwise<ErrorFeedback>{g, e},
                            r.sum_pos, r.sum_neg, r.count_pos, r.count_neg);
  }
  if (!std::isfinite(r.sum_pos) || !std::isfinite(r.sum_neg)) {
    Kokkos::parallel_reduce("a2sgd::compress::count_non_finite", Policy(exec, 0, n),
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
