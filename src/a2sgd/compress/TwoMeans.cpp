#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/compress/impl/FormSelector.hpp>
#include <a2sgd/compress/impl/TwoMeansKernels.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/CacheEviction.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <string>

// The AVX-512 kernel: x86-64 host builds with GCC or Clang (function-level target attributes),
// unless per-ISA host code is switched off (A2SGD_ENABLE_HOST_CLONES=OFF, the portability run).
#if defined(A2SGD_HOST_CLONES_ENABLED) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__INTEL_LLVM_COMPILER)
#define A2SGD_TWO_MEANS_AVX512
#include <immintrin.h>
#endif

namespace a2sgd {
namespace {

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

#ifdef A2SGD_TWO_MEANS_AVX512
// The same sums with AVX-512 intrinsics, 32 values per iteration. What the compiler makes of the
// portable loop (about 22 vector instructions per 16 values: conversions before the compares,
// counts in vector lanes, 0/1 multiplies) keeps the plain one-stream pass well below the memory's
// rate. Here, per 16 values: two float compares into mask registers, counted by popcount on the
// integer units; two conversions to double (from memory when there is no residual to add); and
// four merge-masked double accumulations into eight independent accumulators. The negative ones
// are fused multiply-adds by 1.0 (exact product, one rounding: the same result as an add) so that
// they can issue to the multiply pipes while the positive adds use the add pipes.
// Software prefetch, two_means_prefetch_distance values ahead in each stream (into the next
// blocks: 4 KB with error feedback, which reads two streams, and 8 KB plain; on one 2-core AMD
// EPYC VM the error-feedback pass ran closer to its read ceiling with 4 KB than with 8 KB in
// alternating runs, docs/methods.md), in one of three forms: none, into all cache levels, or
// non-temporal. Which one is fastest is not a property of the CPU model, nor fixed on one
// machine: on one 2-core AMD EPYC VM the
// error-feedback pass ran at 80-87% of the read ceiling without prefetch and up to 102% with it,
// and minutes later at 89-94% without and 78-92% with (docs/methods.md). So large calls are
// timed and the form chosen from their timings (adaptive_pass() below). Prefetching changes no
// arithmetic: every form gives the same bits.
//
// NaN: the positive mask is "not less or equal, unordered", so a NaN entry is added to the
// positive sum and makes it NaN, which sends the caller to the non-finite count, as in the
// portable loop (where NaN * 0 is NaN); +-Inf make a sum infinite.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm256_undefined_pd() as the merge source of unmasked
// conversions and extracts, which -Wuninitialized reports (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

template <bool ErrorFeedback>
constexpr Index two_means_prefetch_distance = ErrorFeedback ? 1024 : 2048;

// Once per block: the eight lanes of an accumulator.
[[maybe_unused]] __attribute__((target("avx512f"))) inline double lane_sum(__m512d v) {
  alignas(64) double lane[8];
  _mm512_store_pd(lane, v);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Locality: __builtin_prefetch's (3: all cache levels, 0: non-temporal), or no_prefetch.
constexpr int no_prefetch = -1;

template <bool ErrorFeedback, int Locality>
[[maybe_unused]] __attribute__((target("avx512f,popcnt"))) void block_sums_avx512(const float* g, const float* e,
                                                                                  Index count, double& sum_pos,
                                                                                  double& sum_neg,
                                                                                  std::int64_t& count_pos,
                                                                                  std::int64_t& count_neg) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d pos[4], neg[4];
  for (int k = 0; k < 4; ++k) pos[k] = neg[k] = _mm512_setzero_pd();
  std::int64_t cp = 0, cn = 0;
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    if constexpr (Locality != no_prefetch) {
      // Integer arithmetic: the address may lie past the end of the buffer (a prefetch never faults).
      const auto ahead = reinterpret_cast<std::uintptr_t>(g + i) + 4 * two_means_prefetch_distance<ErrorFeedback>;
      __builtin_prefetch(reinterpret_cast<const void*>(ahead), 0, Locality);
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + 64), 0, Locality);
      if constexpr (ErrorFeedback) {
        const auto ahead_e = reinterpret_cast<std::uintptr_t>(e + i) + 4 * two_means_prefetch_distance<ErrorFeedback>;
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_e), 0, Locality);
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_e + 64), 0, Locality);
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m512d lo, hi;
      __m512 a;
      if constexpr (ErrorFeedback) {
        a = _mm512_add_ps(_mm512_loadu_ps(g + i + 16 * h), _mm512_loadu_ps(e + i + 16 * h));
        lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
        hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
      } else {
        a = _mm512_loadu_ps(g + i + 16 * h);
        lo = _mm512_cvtps_pd(_mm256_loadu_ps(g + i + 16 * h));
        hi = _mm512_cvtps_pd(_mm256_loadu_ps(g + i + 16 * h + 8));
      }
      const __mmask16 p = _mm512_cmp_ps_mask(a, zero, _CMP_NLE_UQ);
      const __mmask16 m = _mm512_cmp_ps_mask(a, zero, _CMP_LT_OQ);
      cp += __builtin_popcount(static_cast<unsigned>(p));
      cn += __builtin_popcount(static_cast<unsigned>(m));
      pos[2 * h] = _mm512_mask_add_pd(pos[2 * h], static_cast<__mmask8>(p), pos[2 * h], lo);
      neg[2 * h] = _mm512_mask3_fmadd_pd(lo, one, neg[2 * h], static_cast<__mmask8>(m));
      pos[2 * h + 1] = _mm512_mask_add_pd(pos[2 * h + 1], static_cast<__mmask8>(p >> 8), pos[2 * h + 1], hi);
      neg[2 * h + 1] = _mm512_mask3_fmadd_pd(hi, one, neg[2 * h + 1], static_cast<__mmask8>(m >> 8));
    }
  }
  double sp = lane_sum(_mm512_add_pd(_mm512_add_pd(pos[0], pos[1]), _mm512_add_pd(pos[2], pos[3])));
  double sn = lane_sum(_mm512_add_pd(_mm512_add_pd(neg[0], neg[1]), _mm512_add_pd(neg[2], neg[3])));
  for (; i < count; ++i) accumulate(ErrorFeedback ? g[i] + e[i] : g[i], sp, sn, cp, cn);
  sum_pos += sp;
  sum_neg += sn;
  count_pos += cp;
  count_neg += cn;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

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
  bool avx512 = false;  // the AVX-512 kernel instead of the portable loop
  compress::impl::TwoMeansPrefetch prefetch = compress::impl::TwoMeansPrefetch::none;  // of the AVX-512 kernel

  KOKKOS_INLINE_FUNCTION float value(Index i) const { return ErrorFeedback ? g(i) + e(i) : g(i); }

  KOKKOS_INLINE_FUNCTION void operator()(Index b, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    const Index begin = b * block;
    const Index end = begin + block < n ? begin + block : n;
#ifdef A2SGD_TWO_MEANS_AVX512
    if (avx512) {
      const float* eb = ErrorFeedback ? e.data() + begin : nullptr;
      switch (prefetch) {
        case compress::impl::TwoMeansPrefetch::all_levels:
          block_sums_avx512<ErrorFeedback, 3>(g.data() + begin, eb, end - begin, sum_pos, sum_neg, count_pos,
                                              count_neg);
          break;
        case compress::impl::TwoMeansPrefetch::non_temporal:
          block_sums_avx512<ErrorFeedback, 0>(g.data() + begin, eb, end - begin, sum_pos, sum_neg, count_pos,
                                              count_neg);
          break;
        default:
          block_sums_avx512<ErrorFeedback, no_prefetch>(g.data() + begin, eb, end - begin, sum_pos, sum_neg, count_pos,
                                                        count_neg);
      }
      return;
    }
#endif
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

// Hold (ZeroGradient::hold): an entry with g == 0 counts as a = 0, which joins neither set. A NaN
// g is not 0, so it still reaches the sums (and the non-finite count). The compiler's vectorised
// loop serves this variant; it exists for models with sparse gradients, whose step the pass does
// not dominate.
KOKKOS_FORCEINLINE_FUNCTION float held_value(float g, float e) {
  return g != 0.0f ? g + e : 0.0f;
}

A2SGD_HOST_CLONES void block_sums_held(const float* g, const float* e, Index count, double& sum_pos, double& sum_neg,
                                       std::int64_t& count_pos, std::int64_t& count_neg) {
  double sp = 0.0, sn = 0.0;
  int cp = 0, cn = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : sp, sn, cp, cn)
#endif
  for (Index i = 0; i < count; ++i) accumulate(held_value(g[i], e[i]), sp, sn, cp, cn);
  sum_pos += sp;
  sum_neg += sn;
  count_pos += cp;
  count_neg += cn;
}

// Host backends: blocks of the loop above; device backends: an entry per thread.
struct TwoMeansHeld {
  static constexpr Index block = 4096;
  ConstFloatView g;
  ConstFloatView e;
  Index n;

  KOKKOS_INLINE_FUNCTION void operator()(Index b, double& sum_pos, double& sum_neg, std::int64_t& count_pos,
                                         std::int64_t& count_neg) const {
    if constexpr (host_backend) {
      const Index begin = b * block;
      const Index end = begin + block < n ? begin + block : n;
      block_sums_held(g.data() + begin, e.data() + begin, end - begin, sum_pos, sum_neg, count_pos, count_neg);
    } else {
      accumulate(held_value(g(b), e(b)), sum_pos, sum_neg, count_pos, count_neg);
    }
  }
};

struct CountNonFiniteHeld {
  ConstFloatView g;
  ConstFloatView e;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, std::int64_t& count) const {
    count += detail::non_finite(held_value(g(i), e(i)));
  }
};

// The host pass over the first n entries, in blocks.
template <bool ErrorFeedback>
TwoMeansResult blocked_sums(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e, Index n,
                            bool avx512, compress::impl::TwoMeansPrefetch prefetch) {
  using Blocked = TwoMeansBlocked<ErrorFeedback>;
  TwoMeansResult r;
  Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::two_means"),
                          Policy(exec, 0, (n + Blocked::block - 1) / Blocked::block),
                          Blocked{g, e, n, avx512, prefetch}, r.sum_pos, r.sum_neg, r.count_pos, r.count_neg);
  return r;
}

// The selector numbers the forms as two_means_prefetch_forms lists them.
constexpr auto& prefetch_forms = compress::impl::two_means_prefetch_forms;
static_assert(std::size(prefetch_forms) == compress::impl::FormSelector::forms);

// The form both variants run unless timings say another is clearly faster, and before there are
// any: in the third sitting of docs/methods.md, which times every form forced with each pass
// starting from memory, non-temporal prefetch was the fastest form with error feedback in 23 of
// 30 runs and, plain, at least as fast as prefetch into all levels in 20 of 30.
constexpr compress::impl::TwoMeansPrefetch preferred_form = compress::impl::TwoMeansPrefetch::non_temporal;

constexpr int form_index(compress::impl::TwoMeansPrefetch form) {
  for (int f = 0; f < compress::impl::FormSelector::forms; ++f)
    if (prefetch_forms[f] == form) return f;
  return -1;
}
constexpr int preferred_index = form_index(preferred_form);
static_assert(preferred_index >= 0);

// Per variant ([1]: error feedback), process-wide: a choice timed on one model's pass serves the
// next model's.
struct PrefetchChoice {
  std::mutex mutex;
  compress::impl::FormSelector selector[2] = {compress::impl::FormSelector(preferred_index),
                                              compress::impl::FormSelector(preferred_index)};
};

PrefetchChoice& prefetch_choice() {
  static PrefetchChoice choice;
  return choice;
}

// A pass of the AVX-512 kernel with the prefetch form `automatic` stands for. Calls with at least
// two_means_calibration_values entries are timed and recorded (the first one first times every
// form on a window of the data, alternately, until each has a median); smaller calls, whose data
// may sit in a cache, take the form chosen so far, or the preferred one before any.
template <bool ErrorFeedback>
TwoMeansResult adaptive_pass(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e, Index n) {
  using compress::impl::TwoMeansPrefetch;
  auto& choice = prefetch_choice();
  auto& selector = choice.selector[ErrorFeedback ? 1 : 0];
  std::unique_lock<std::mutex> lock(choice.mutex);
  if (n < compress::impl::two_means_calibration_values) {
    const int fastest = selector.fastest();
    lock.unlock();
    const TwoMeansPrefetch form = fastest >= 0 ? prefetch_forms[fastest] : preferred_form;
    return blocked_sums<ErrorFeedback>(exec, g, e, n, true, form);
  }
  // A pass over the first `count` entries with `form`, and its seconds per entry.
  double seconds_per_entry = 0.0;
  auto timed_pass = [&](Index count, int form) {
    const Stopwatch clock;
    const TwoMeansResult r = blocked_sums<ErrorFeedback>(exec, g, e, count, true, prefetch_forms[form]);
    seconds_per_entry = clock.seconds() / static_cast<double>(count);
    return r;
  };
  const Index w = std::min(n, compress::impl::two_means_calibration_window);
  // Once per process and variant (other callers wait): 15 passes fill the selector. The bound
  // only guards against timings it would refuse, which a steady clock does not give.
  // Each pass starts with the window out of the caches: back to back, a pass would find part of
  // the window its predecessor left in the last-level cache, and how much depends on the
  // predecessor's form; the forms differ only in how they fetch from memory.
  constexpr int most_passes = 2 * compress::impl::FormSelector::forms * compress::impl::FormSelector::window;
  for (int pass = 0; pass < most_passes && !selector.ready(); ++pass) {
    const int form = selector.next();
    impl::evict_from_caches(g.data(), sizeof(float) * static_cast<std::size_t>(w));
    if constexpr (ErrorFeedback) impl::evict_from_caches(e.data(), sizeof(float) * static_cast<std::size_t>(w));
    timed_pass(w, form);
    selector.record(form, seconds_per_entry);
  }
  const int form = selector.next();
  lock.unlock();
  const TwoMeansResult r = timed_pass(n, form);
  lock.lock();
  selector.record(form, seconds_per_entry);
  return r;
}

template <bool ErrorFeedback>
TwoMeansResult run(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                   compress::impl::TwoMeansKernel kernel, compress::impl::TwoMeansPrefetch prefetch) {
  const auto n = static_cast<Index>(g.extent(0));
  TwoMeansResult r;
  if (n == 0) return r;
  if constexpr (host_backend) {
    const bool avx512 = kernel == compress::impl::TwoMeansKernel::avx512;
    if (avx512 && prefetch == compress::impl::TwoMeansPrefetch::automatic)
      r = adaptive_pass<ErrorFeedback>(exec, g, e, n);
    else
      r = blocked_sums<ErrorFeedback>(exec, g, e, n, avx512, prefetch);
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

namespace compress::impl {

const char* to_string(TwoMeansPrefetch prefetch) noexcept {
  switch (prefetch) {
    case TwoMeansPrefetch::none:
      return "none";
    case TwoMeansPrefetch::all_levels:
      return "all_levels";
    case TwoMeansPrefetch::non_temporal:
      return "non_temporal";
    default:
      return "automatic";
  }
}

TwoMeansPrefetch two_means_prefetch_chosen(bool error_feedback) {
  auto& choice = prefetch_choice();
  const std::lock_guard<std::mutex> lock(choice.mutex);
  const int fastest = choice.selector[error_feedback ? 1 : 0].fastest();
  return fastest >= 0 ? prefetch_forms[fastest] : TwoMeansPrefetch::automatic;
}

bool two_means_avx512_available() noexcept {
#ifdef A2SGD_TWO_MEANS_AVX512
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt");
  return available;
#else
  return false;
#endif
}

TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                         TwoMeansKernel kernel, TwoMeansPrefetch prefetch) {
  if (kernel == TwoMeansKernel::avx512 && !two_means_avx512_available())
    throw InvalidArgument("two_means: the AVX-512 kernel is not available in this build or on this CPU");
  if (e.extent(0) == 0) return run<false>(exec, g, e, kernel, prefetch);
  if (e.extent(0) != g.extent(0))
    throw InvalidArgument("two_means: gradient has " + std::to_string(g.extent(0)) + " values, residual " +
                          std::to_string(e.extent(0)));
  return run<true>(exec, g, e, kernel, prefetch);
}

}  // namespace compress::impl

TwoMeansResult two_means_held(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
  if (e.extent(0) != g.extent(0))
    throw InvalidArgument("two_means_held: gradient has " + std::to_string(g.extent(0)) + " values, residual " +
                          std::to_string(e.extent(0)));
  const auto n = static_cast<Index>(g.extent(0));
  TwoMeansResult r;
  if (n == 0) return r;
  const Index work = host_backend ? (n + TwoMeansHeld::block - 1) / TwoMeansHeld::block : n;
  Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::two_means_held"), Policy(exec, 0, work), TwoMeansHeld{g, e, n},
                          r.sum_pos, r.sum_neg, r.count_pos, r.count_neg);
  if (!std::isfinite(r.sum_pos) || !std::isfinite(r.sum_neg))
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::compress::count_non_finite"), Policy(exec, 0, n),
                            CountNonFiniteHeld{g, e}, r.non_finite);
  return r;
}

TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
  using compress::impl::TwoMeansKernel;
  return compress::impl::two_means(
      exec, g, e, compress::impl::two_means_avx512_available() ? TwoMeansKernel::avx512 : TwoMeansKernel::portable);
}

}  // namespace a2sgd
