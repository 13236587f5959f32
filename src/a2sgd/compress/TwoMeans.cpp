#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/core/Error.hpp>

#include <string>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

// Host backends: one work item is a contiguous block, read through `lanes` independent
// accumulator sets. A single accumulator chain would bound the pass by the latency of a
// double add (a few cycles per element) instead of memory bandwidth; independent lanes let
// the compiler interleave them (and vectorise where the target allows).
constexpr int lanes = 8;
constexpr Index block = 4096;

template <bool ErrorFeedback>
struct TwoMeansBlocked {
  ConstFloatView g;
  ConstFloatView e;
  Index n;

  KOKKOS_INLINE_FUNCTION float value(Index i) const { return ErrorFeedback ? g(i) + e(i) : g(i); }

  KOKKOS_INLINE_FUNCTION void operator()(Index b, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg, std::int64_t& non_finite) const {
    const Index begin = b * block;
    const Index end = begin + block < n ? begin + block : n;
    double sp[lanes] = {};
    double sn[lanes] = {};
    int cp[lanes] = {};
    int cn[lanes] = {};
    int bad[lanes] = {};
    Index i = begin;
    for (; i + lanes <= end; i += lanes) {
      for (int k = 0; k < lanes; ++k) {
        const float a = value(i + k);
        const bool finite = a - a == 0.0f;
        const bool pos = finite && a > 0.0f;
        const bool neg = finite && a < 0.0f;
        sp[k] += pos ? static_cast<double>(a) : 0.0;
        sn[k] += neg ? static_cast<double>(a) : 0.0;
        cp[k] += pos;
        cn[k] += neg;
        bad[k] += !finite;
      }
    }
    for (; i < end; ++i) {
      const float a = value(i);
      const bool finite = a - a == 0.0f;
      sp[0] += finite && a > 0.0f ? static_cast<double>(a) : 0.0;
      sn[0] += finite && a < 0.0f ? static_cast<double>(a) : 0.0;
      cp[0] += finite && a > 0.0f;
      cn[0] += finite && a < 0.0f;
      bad[0] += !finite;
    }
    for (int k = 0; k < lanes; ++k) {
      sum_pos += sp[k];
      sum_neg += sn[k];
      count_pos += cp[k];
      count_neg += cn[k];
      non_finite += bad[k];
    }
  }
};

// GPU backends: one entry per thread, so consecutive threads read consecutive addresses.
template <bool ErrorFeedback>
struct TwoMeansElementwise {
  ConstFloatView g;
  ConstFloatView e;

  KOKKOS_INLINE_FUNCTION void operator()(Index i, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg, std::int64_t& non_finite) const {
    const float a = ErrorFeedback ? g(i) + e(i) : g(i);
    if (!(a - a == 0.0f)) {
      ++non_finite;
    } else if (a > 0.0f) {
      sum_pos += a;
      ++count_pos;
    } else if (a < 0.0f) {
      sum_neg += a;
      ++count_neg;
    }
  }
};

template <bool ErrorFeedback>
TwoMeansResult run(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
  const auto n = static_cast<Index>(g.extent(0));
  TwoMeansResult r;
  if (n == 0) return r;
  constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
  if constexpr (host_backend) {
    Kokkos::parallel_reduce("a2sgd::compress::two_means", Policy(exec, 0, (n + block - 1) / block),
                            TwoMeansBlocked<ErrorFeedback>{g, e, n}, r.sum_pos, r.sum_neg, r.count_pos, r.count_neg,
                            r.non_finite);
  } else {
    Kokkos::parallel_reduce("a2sgd::compress::two_means", Policy(exec, 0, n), TwoMeansElementwise<ErrorFeedback>{g, e},
                            r.sum_pos, r.sum_neg, r.count_pos, r.count_neg, r.non_finite);
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
