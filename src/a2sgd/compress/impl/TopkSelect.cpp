#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/TopkSelect.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

namespace a2sgd::compress::impl {
namespace {

using Team = Kokkos::TeamPolicy<ExecutionSpace>;
using Member = Team::member_type;
using Bins = Kokkos::View<int*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// The three digits of a 31-bit magnitude pattern: its bits [shift, shift + log2 bins); a pass
// counts the entries whose bits above `match` equal the digits found so far.
struct Digit {
  int shift, bins, match;
};
constexpr Digit digits[3] = {{20, 2048, 31}, {8, 4096, 20}, {0, 256, 8}};
constexpr int max_bins = 4096;

KOKKOS_INLINE_FUNCTION std::uint32_t magnitude_bits(float v) {
  return detail::float_bits(v) & 0x7fffffffu;
}

// Host teams are one thread with `copies` interleaved sub-histograms: gradient magnitudes cluster
// in a few bins, and consecutive increments of one counter would wait on each other.
constexpr int host_copies = 4;
constexpr int bin_copies = host_backend ? host_copies : 1;

// One histogram pass. A team counts a contiguous chunk into its own scratch bins (device teams:
// shared-memory atomics), then adds the non-empty bins to the global histogram. With Fold the pass
// first forms a = g + e, stores it in e and counts its non-finite entries.
template <bool Fold, class Data>
struct HistogramPass {
  ConstFloatView g;
  Data e;
  Kokkos::View<std::int64_t*, MemorySpace> histogram;
  Kokkos::View<std::int64_t*, MemorySpace> state;
  Kokkos::View<std::int64_t, MemorySpace> non_finite;
  Index n, chunk;
  Digit digit;

  // The entry's bin, or -1 when its higher digits differ from those found so far.
  KOKKOS_INLINE_FUNCTION int bin_of(float a, std::uint32_t found) const {
    const std::uint32_t key = magnitude_bits(a);
    return (key >> digit.match) == (found >> digit.match)
               ? static_cast<int>((key >> digit.shift) & static_cast<std::uint32_t>(digit.bins - 1))
               : -1;
  }

  KOKKOS_INLINE_FUNCTION float value(Index i, std::int64_t& bad) const {
    if constexpr (Fold) {
      const float a = g(i) + e(i);
      e(i) = a;
      bad += detail::non_finite(a);
      return a;
    } else {
      return e(i);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int bins_total = bin_copies * digit.bins;
    const Bins bins(team.team_scratch(0), bins_total);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, bins_total), [&](int b) { bins(b) = 0; });
    team.team_barrier();
    const auto found = static_cast<std::uint32_t>(state(0));
    const Index begin = static_cast<Index>(team.league_rank()) * chunk;
    const Index end = begin + chunk < n ? begin + chunk : n;
    std::int64_t bad = 0;
    if constexpr (host_backend) {
      for (Index i = begin; i < end; ++i) {
        const int bin = bin_of(value(i, bad), found);
        if (bin >= 0) ++bins(static_cast<int>(i % host_copies) * digit.bins + bin);
      }
      for (int b = 0; b < digit.bins; ++b) {
        int count = 0;
        for (int c = 0; c < host_copies; ++c) count += bins(c * digit.bins + b);
        if (count != 0) Kokkos::atomic_add(&histogram(b), static_cast<std::int64_t>(count));
      }
    } else {
      Kokkos::parallel_reduce(
          Kokkos::TeamThreadRange(team, begin, end),
          [&](Index i, std::int64_t& b) {
            const int bin = bin_of(value(i, b), found);
            if (bin >= 0) Kokkos::atomic_add(&bins(bin), 1);
          },
          bad);
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, digit.bins), [&](int b) {
        if (bins(b) != 0) Kokkos::atomic_add(&histogram(b), static_cast<std::int64_t>(bins(b)));
      });
    }
    if (Fold && bad != 0) Kokkos::single(Kokkos::PerTeam(team), [&]() { Kokkos::atomic_add(&non_finite(), bad); });
  }
};

}  // namespace

// The selection scan's rule: every entry above the threshold pattern, and the first `ties`
// entries equal to it. Host backends read the threshold once (the host can read the state, and
// the compiler could not keep a value in a register that the output writes might alias).
//
// Outside the anonymous namespace: a device build compiles only one of the two sources of the
// threshold, and nvcc warns about an unreferenced member function with internal linkage.
struct Threshold {
  std::uint32_t pattern;
  std::int64_t ties;
};

struct ThresholdOnDevice {
  Kokkos::View<const std::int64_t*, MemorySpace> state;
  KOKKOS_INLINE_FUNCTION Threshold operator()() const { return {static_cast<std::uint32_t>(state(0)), state(1)}; }
};

struct ThresholdValue {
  Threshold t;
  KOKKOS_INLINE_FUNCTION Threshold operator()() const { return t; }
};

namespace {

// Every entry above the threshold pattern T, and the first `ties` entries equal to it, into out
// in index order (and, with Fold, out of e). One 64-bit scan counts both: entries above in the
// low 32 bits, entries equal in the high ones.
template <bool Fold, class Data, class ThresholdOf>
void compact(const ExecutionSpace& exec, const Data& e, const TopkSelector::Words& out, Index n,
             const ThresholdOf& threshold_of) {
  Kokkos::parallel_scan(
      A2SGD_LABEL("a2sgd::compress::topk_compact"), Policy(exec, 0, n),
      KOKKOS_LAMBDA(Index i, std::int64_t & before, bool final) {
        const Threshold t = threshold_of();
        const float v = e(i);
        const std::uint32_t key = magnitude_bits(v);
        const std::int64_t above = key > t.pattern, tie = key == t.pattern;
        if (final) {
          const std::int64_t above_before = before & 0xffffffff, ties_before = before >> 32;
          if (above || (tie && ties_before < t.ties)) {
            out(above_before + (ties_before < t.ties ? ties_before : t.ties)) =
                (static_cast<std::uint64_t>(i) << 32) | detail::float_bits(v);
            if constexpr (Fold) e(i) = 0.0f;  // what is sent leaves the residual
          }
        }
        before += above | (tie << 32);
      });
}

// A free function: nvcc requires the function enclosing a device lambda to be accessible.
template <bool Fold, class Data>
void radix_select(const ExecutionSpace& exec, const ConstFloatView& g, const Data& e,
                  const TopkSelector::Count& non_finite, const TopkSelector::Words& out, Index k,
                  const Kokkos::View<std::int64_t*, MemorySpace>& histogram,
                  const Kokkos::View<std::int64_t*, MemorySpace>& state) {
  const auto n = static_cast<Index>(e.extent(0));
  if (k > n) throw InvalidArgument("topk: k = " + std::to_string(k) + " for n = " + std::to_string(n));
  if (n >= (Index(1) << 32)) throw InvalidArgument("topk: n = " + std::to_string(n) + " needs 64-bit indices");
  if (static_cast<Index>(out.extent(0)) < k)
    throw InvalidArgument("topk: output holds " + std::to_string(out.extent(0)) + " entries, k = " + std::to_string(k));
  const Kokkos::View<std::int64_t, MemorySpace> bad = non_finite;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_init"), Policy(exec, 0, max_bins), KOKKOS_LAMBDA(Index b) {
        histogram(b) = 0;
        if (b == 0) {
          state(0) = 0;  // digits found so far
          state(1) = k;  // entries still to take at or below them
          if (Fold) bad() = 0;
        }
      });

  // Host teams take large chunks (a few per thread); device teams a block's worth of entries.
  const int team_size = host_backend ? 1 : 256;
  const Index chunk =
      host_backend ? std::max<Index>(4096, n / (4 * std::max(1, exec.concurrency()))) + 1 : Index(team_size) * 64;
  const auto league = static_cast<int>((n + chunk - 1) / chunk);
  for (int pass = 0; pass < 3; ++pass) {
    const Digit digit = digits[pass];
    if (league > 0) {
      const auto policy =
          Team(exec, league, team_size).set_scratch_size(0, Kokkos::PerTeam(bin_copies * digit.bins * sizeof(int)));
      if (Fold && pass == 0)
        Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::topk_fold_histogram"), policy,
                             HistogramPass<Fold, Data>{g, e, histogram, state, bad, n, chunk, digit});
      else
        Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::topk_histogram"), policy,
                             HistogramPass<false, Data>{g, e, histogram, state, bad, n, chunk, digit});
    }
    // The bin where the count from the top reaches the entries still to take holds the k-th
    // largest pattern; what lies above it is taken whole.
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::topk_digit"), Policy(exec, 0, 1), KOKKOS_LAMBDA(Index) {
          const std::int64_t remaining = state(1);
          std::int64_t above = 0;
          int b = digit.bins - 1;
          for (; b > 0; --b) {
            if (above + histogram(b) >= remaining) break;
            above += histogram(b);
          }
          state(0) |= static_cast<std::int64_t>(b) << digit.shift;
          state(1) = remaining - above;
          for (int i = 0; i < digit.bins; ++i) histogram(i) = 0;
        });
  }

  if constexpr (host_backend) {
    exec.fence();  // host backends: reading the state costs nothing
    compact<Fold>(exec, e, out, n, ThresholdValue{{static_cast<std::uint32_t>(state(0)), state(1)}});
  } else {
    compact<Fold>(exec, e, out, n, ThresholdOnDevice{state});
  }
}

// --- sampled ---

// |a| >= t is tested as !(|a| < t) on the host and as !(a^2 < t^2) in double on the device (no
// sign branch, signs are random; a NaN counts as large): the same test exactly, since a float's
// square is exact in double. The host counts blocks with a plain SIMD function over raw pointers
// (compiled per ISA): a Kokkos lambda inlined into the OpenMP backend's parallel region stayed
// scalar with GCC 12. 32-bit lanes: a block holds fewer than 2^31 entries.
// Per 32-entry chunk, with software prefetch (core/impl/Prefetch.hpp).
A2SGD_HOST_CLONES std::int64_t block_count_at_least(const float* a, Index count, float t) {
  std::int32_t c = 0;
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    a2sgd::impl::prefetch_chunk(a + i);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : c)
#endif
    for (Index j = i; j < i + 32; ++j) c += !(detail::abs(a[j]) < t);
  }
  for (; i < count; ++i) c += !(detail::abs(a[i]) < t);
  return c;
}

constexpr Index count_block = 4096;

KOKKOS_INLINE_FUNCTION float candidate_magnitude(float v) {
  const float m = detail::abs(v);
  return m == m ? m : detail::bits_float(0x7f800000u);  // NaN orders above every number
}

// The candidates of one block: indices (from `base`) and magnitudes of its entries with
// |a| >= t, in index order; returns how many. About 2k of n entries are candidates, so most
// 32-entry chunks hold none: one SIMD pass per chunk forms the mask of its candidates, and only
// their bits are visited (a branch per entry bounded the pass, not memory).
// !(|a| < t) is the count's test: a NaN is a candidate.
A2SGD_HOST_CLONES Index block_compact_at_least(const float* a, Index count, Index base, float t, Index* index,
                                               float* magnitude) {
  Index out = 0;
  Index i = 0;
  for (; i + 32 <= count; i += 32) {
    a2sgd::impl::prefetch_chunk(a + i);
    std::uint32_t mask = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(| : mask)
#endif
    for (int j = 0; j < 32; ++j) mask |= !(detail::abs(a[i + j]) < t) ? lane_bit[j] : 0u;
    while (mask != 0) {
      const Index j = i + __builtin_ctz(mask);
      index[out] = base + j;
      magnitude[out] = candidate_magnitude(a[j]);
      ++out;
      mask &= mask - 1;
    }
  }
  for (; i < count; ++i)
    if (!(detail::abs(a[i]) < t)) {
      index[out] = base + i;
      magnitude[out] = candidate_magnitude(a[i]);
      ++out;
    }
  return out;
}

// The number of entries with |a| >= threshold. On host backends the per-block counts are left in
// `block_counts` (ceil(n / count_block) entries), so that the compaction can write each block's
// candidates at known offsets in a single further pass.
std::int64_t count_at_least(const ExecutionSpace& exec, const ConstFloatView& a, float threshold,
                            const Kokkos::View<std::int64_t*, MemorySpace>& block_counts) {
  const double t2 = static_cast<double>(threshold) * threshold;
  const auto n = static_cast<Index>(a.extent(0));
  std::int64_t c = 0;
  if constexpr (host_backend) {
    Kokkos::parallel_reduce(
        A2SGD_LABEL("a2sgd::compress::topk_count"), Policy(exec, 0, (n + count_block - 1) / count_block),
        [=](Index b, std::int64_t& s) {
          const Index begin = b * count_block;
          const std::int64_t here =
              block_count_at_least(a.data() + begin, begin + count_block < n ? count_block : n - begin, threshold);
          block_counts(b) = here;
          s += here;
        },
        c);
  } else {
    Kokkos::parallel_reduce(
        A2SGD_LABEL("a2sgd::compress::topk_count"), Policy(exec, 0, n),
        KOKKOS_LAMBDA(Index i, std::int64_t & s) { s += !(static_cast<double>(a(i)) * a(i) < t2); }, c);
  }
  return c;
}

// Indices and magnitudes (NaN as +Inf) of the entries with |a| >= threshold, ascending index.
// Host backends: each block from the offset its count gives (block_counts must hold the counts
// for this threshold; they are turned into offsets); device backends: one scan.
void compact_at_least(const ExecutionSpace& exec, const ConstFloatView& a, float threshold,
                      const Kokkos::View<Index*, MemorySpace>& index,
                      const Kokkos::View<float*, MemorySpace>& magnitude,
                      const Kokkos::View<std::int64_t*, MemorySpace>& block_counts) {
  const double t2 = static_cast<double>(threshold) * threshold;
  const auto n = static_cast<Index>(a.extent(0));
  if constexpr (host_backend) {
    const auto blocks = static_cast<Index>((n + count_block - 1) / count_block);
    std::int64_t offset = 0;
    for (Index b = 0; b < blocks; ++b) {
      const std::int64_t here = block_counts(b);
      block_counts(b) = offset;
      offset += here;
    }
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::topk_candidates"), Policy(exec, 0, blocks), [=](Index b) {
      const Index out = block_counts(b);
      const Index begin = b * count_block;
      block_compact_at_least(a.data() + begin, begin + count_block < n ? count_block : n - begin, begin, threshold,
                             index.data() + out, magnitude.data() + out);
    });
  } else {
    const auto keep = KOKKOS_LAMBDA(float v) {
      return !(static_cast<double>(v) * v < t2);
    };
    const auto as_magnitude = KOKKOS_LAMBDA(float v) {
      const float m = detail::abs(v);
      return m == m ? m : detail::bits_float(0x7f800000u);
    };
    Kokkos::parallel_scan(
        A2SGD_LABEL("a2sgd::compress::topk_candidates"), Policy(exec, 0, n),
        KOKKOS_LAMBDA(Index i, Index & offset, bool final) {
          const bool kept = keep(a(i));
          if (final && kept) {
            index(offset) = i;
            magnitude(offset) = as_magnitude(a(i));
          }
          offset += kept;
        });
  }
}

// out(j) = the j-th chosen entry; with Fold it leaves e.
template <bool Fold, class Data>
void pack_chosen(const ExecutionSpace& exec, const Data& e, const Kokkos::View<Index*, MemorySpace>& chosen,
                 const TopkSelector::Words& out, Index k) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_pack"), Policy(exec, 0, k), KOKKOS_LAMBDA(Index j) {
        const Index i = chosen(j);
        out(j) = (static_cast<std::uint64_t>(i) << 32) | detail::float_bits(e(i));
        if constexpr (Fold) e(i) = 0.0f;
      });
}

}  // namespace

TopkSelector::TopkSelector(Index k, Index n, Algorithm algorithm) : m_k(k), m_algorithm(algorithm) {
  if (k < 1 || k > n) throw InvalidArgument("topk: k = " + std::to_string(k) + " for n = " + std::to_string(n));
  if (m_algorithm == Algorithm::automatic) m_algorithm = host_backend ? Algorithm::sampled : Algorithm::radix;
  if (m_algorithm == Algorithm::radix) {
    m_histogram = Kokkos::View<std::int64_t*, MemorySpace>("a2sgd::topk::histogram", max_bins);
    m_state = Kokkos::View<std::int64_t*, MemorySpace>("a2sgd::topk::state", 2);
  } else {
    const auto m = static_cast<std::size_t>(std::min<Index>(n, 16384));
    m_sample = Kokkos::View<float*, MemorySpace>("a2sgd::topk::sample", m);
    m_host_sample = Kokkos::create_mirror_view(m_sample);
    m_sorted_sample.resize(m);
    m_chosen = Kokkos::View<Index*, MemorySpace>("a2sgd::topk::chosen", static_cast<std::size_t>(k));
    if (host_backend)
      m_block_counts = Kokkos::View<std::int64_t*, MemorySpace>(
          "a2sgd::topk::block_counts", static_cast<std::size_t>((n + count_block - 1) / count_block));
    m_host_chosen = Kokkos::create_mirror_view(m_chosen);
  }
}

namespace {

// sample(j) = |a(j * stride)|. A free function: nvcc allows no extended lambda in a private member.
void sample_magnitudes(const ExecutionSpace& exec, const ConstFloatView& a,
                       const Kokkos::View<float*, MemorySpace>& sample, Index stride) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_sample"), Policy(exec, 0, static_cast<Index>(sample.extent(0))),
      KOKKOS_LAMBDA(Index j) { sample(j) = detail::abs(a(j * stride)); });
}

}  // namespace

void TopkSelector::choose_sampled(const ExecutionSpace& exec, const ConstFloatView& a) {
  const auto n = static_cast<Index>(a.extent(0));
  const Index k = m_k;
  // Threshold from a strided sample of |a|, aiming at about 2k candidates.
  const auto m = static_cast<Index>(m_sample.extent(0));
  const Index stride = n / m;
  sample_magnitudes(exec, a, m_sample, stride);
  Kokkos::deep_copy(exec, m_host_sample, m_sample);
  exec.fence();
  std::copy(m_host_sample.data(), m_host_sample.data() + m, m_sorted_sample.begin());
  // Order statistics of the sample by selection, not sorting (O(m) per query).
  auto threshold_for = [&](double factor) {
    const auto rank = static_cast<std::size_t>(
        std::min<double>(static_cast<double>(m - 1), std::ceil(factor * static_cast<double>(k) * m / n)));
    std::nth_element(m_sorted_sample.begin(), m_sorted_sample.begin() + static_cast<std::ptrdiff_t>(rank),
                     m_sorted_sample.end(), std::greater<float>());
    return m_sorted_sample[rank];
  };
  float threshold = threshold_for(2.0);
  std::int64_t count = count_at_least(exec, a, threshold, m_block_counts);
  float counted = threshold;  // the threshold m_block_counts holds the counts of
  // Rare corrections: too few candidates (lower the bar), far too many (raise it).
  for (double factor = 8.0; count < k && threshold > 0.0f; factor *= 4.0) {
    threshold = factor * k * m / n >= m - 1 ? 0.0f : threshold_for(factor);
    count = count_at_least(exec, a, threshold, m_block_counts);
    counted = threshold;
  }
  for (double factor = 1.0; count > 8 * k && factor > 0.1; factor /= 2.0) {
    const float higher = threshold_for(factor);
    const std::int64_t c = count_at_least(exec, a, higher, m_block_counts);
    counted = higher;
    if (c < k) break;
    threshold = higher;
    count = c;
  }
  if (counted != threshold) count_at_least(exec, a, threshold, m_block_counts);
  // The candidates (count >= k: at threshold 0 every entry is one), then the exact k of them:
  // largest magnitude first, then the lower index. Only the candidates reach the host.
  if (static_cast<std::int64_t>(m_candidates.extent(0)) < count) {
    const auto capacity =
        static_cast<std::size_t>(std::max<std::int64_t>(count, 2 * static_cast<std::int64_t>(m_candidates.extent(0))));
    m_candidates = Kokkos::View<Index*, MemorySpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::topk::candidates"), capacity);
    m_magnitudes = Kokkos::View<float*, MemorySpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::topk::magnitudes"), capacity);
    m_host_candidates = Kokkos::create_mirror_view(m_candidates);
    m_host_magnitudes = Kokkos::create_mirror_view(m_magnitudes);
    m_keyed.reserve(capacity);
  }
  compact_at_least(exec, a, threshold, m_candidates, m_magnitudes, m_block_counts);
  const auto found = std::make_pair(std::size_t(0), static_cast<std::size_t>(count));
  Kokkos::deep_copy(exec, Kokkos::subview(m_host_candidates, found), Kokkos::subview(m_candidates, found));
  Kokkos::deep_copy(exec, Kokkos::subview(m_host_magnitudes, found), Kokkos::subview(m_magnitudes, found));
  exec.fence();
  m_keyed.clear();
  for (std::int64_t i = 0; i < count; ++i) m_keyed.emplace_back(m_host_magnitudes(i), m_host_candidates(i));
  auto before = [](const std::pair<float, Index>& x, const std::pair<float, Index>& y) {
    return x.first > y.first || (x.first == y.first && x.second < y.second);
  };
  std::nth_element(m_keyed.begin(), m_keyed.begin() + (k - 1), m_keyed.end(), before);
  // The chosen are the candidates not after the k-th in that total order; the candidates are in
  // ascending index order already, so one pass lists them ascending (no sort of the k indices).
  const std::pair<float, Index> kth = m_keyed[static_cast<std::size_t>(k - 1)];
  Index taken = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::pair<float, Index> x{m_host_magnitudes(i), m_host_candidates(i)};
    if (!before(kth, x)) m_host_chosen(taken++) = x.second;
  }
  if (taken != k) throw Error("topk: selected " + std::to_string(taken) + " entries, not k = " + std::to_string(k));
  Kokkos::deep_copy(exec, m_chosen, m_host_chosen);
}

void TopkSelector::fold_and_select(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                                   const Count& non_finite, const Words& out) {
  if (m_algorithm == Algorithm::radix) {
    radix_select<true>(exec, g, e, non_finite, out, m_k, m_histogram, m_state);
  } else {
    fold_into_residual(exec, g, e, non_finite);
    choose_sampled(exec, e);
    pack_chosen<true>(exec, e, m_chosen, out, m_k);
  }
}

void TopkSelector::select(const ExecutionSpace& exec, const ConstFloatView& a, const Words& out) {
  if (m_algorithm == Algorithm::radix) {
    radix_select<false>(exec, ConstFloatView(), a, Count(), out, m_k, m_histogram, m_state);
  } else {
    choose_sampled(exec, a);
    pack_chosen<false>(exec, a, m_chosen, out, m_k);
  }
}

}  // namespace a2sgd::compress::impl
