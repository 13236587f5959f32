#include <a2sgd/compress/impl/TopkSelect.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>

#include <algorithm>
#include <string>

namespace a2sgd::compress::impl {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
using Team = Kokkos::TeamPolicy<ExecutionSpace>;
using Member = Team::member_type;
using Bins = Kokkos::View<int*, ExecutionSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;

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

// One histogram pass. A team counts a contiguous chunk into its own scratch bins (host teams are
// one thread: plain increments; device teams: shared-memory atomics), then adds the non-empty
// bins to the global histogram. With Fold the pass first forms a = g + e, stores it in e and
// counts its non-finite entries.
template <bool Fold, class Data>
struct HistogramPass {
  ConstFloatView g;
  Data e;
  Kokkos::View<std::int64_t*, MemorySpace> histogram;
  Kokkos::View<std::int64_t*, MemorySpace> state;
  Kokkos::View<std::int64_t, MemorySpace> non_finite;
  Index n, chunk;
  Digit digit;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const Bins bins(team.team_scratch(0), digit.bins);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, digit.bins), [&](int b) { bins(b) = 0; });
    team.team_barrier();
    const auto found = static_cast<std::uint32_t>(state(0));
    const Index begin = static_cast<Index>(team.league_rank()) * chunk;
    const Index end = begin + chunk < n ? begin + chunk : n;
    std::int64_t bad = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, begin, end),
        [&](Index i, std::int64_t& b) {
          float a;
          if constexpr (Fold) {
            a = g(i) + e(i);
            e(i) = a;
            b += detail::non_finite(a);
          } else {
            a = e(i);
          }
          const std::uint32_t key = magnitude_bits(a);
          if ((key >> digit.match) == (found >> digit.match)) {
            const int bin = static_cast<int>((key >> digit.shift) & static_cast<std::uint32_t>(digit.bins - 1));
            if constexpr (host_backend)
              ++bins(bin);
            else
              Kokkos::atomic_increment(&bins(bin));
          }
        },
        bad);
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, digit.bins), [&](int b) {
      if (bins(b) != 0) Kokkos::atomic_add(&histogram(b), static_cast<std::int64_t>(bins(b)));
    });
    if (Fold && bad != 0) Kokkos::single(Kokkos::PerTeam(team), [&]() { Kokkos::atomic_add(&non_finite(), bad); });
  }
};

}  // namespace

TopkSelector::TopkSelector(Index k)
    : m_k(k), m_histogram("a2sgd::topk::histogram", max_bins), m_state("a2sgd::topk::state", 2) {
  if (k < 1) throw InvalidArgument("topk: k = " + std::to_string(k) + " is not positive");
}

void TopkSelector::fold_and_select(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                                   const Count& non_finite, const Words& out) const {
  run<true>(exec, g, e, non_finite, out);
}

void TopkSelector::select(const ExecutionSpace& exec, const ConstFloatView& a, const Words& out) const {
  run<false>(exec, ConstFloatView(), a, Count(), out);
}

template <bool Fold, class Data>
void TopkSelector::run(const ExecutionSpace& exec, const ConstFloatView& g, const Data& e, const Count& non_finite,
                       const Words& out) const {
  const auto n = static_cast<Index>(e.extent(0));
  const Index k = m_k;
  if (k > n) throw InvalidArgument("topk: k = " + std::to_string(k) + " for n = " + std::to_string(n));
  if (n >= (Index(1) << 32)) throw InvalidArgument("topk: n = " + std::to_string(n) + " needs 64-bit indices");
  if (static_cast<Index>(out.extent(0)) < k)
    throw InvalidArgument("topk: output holds " + std::to_string(out.extent(0)) + " entries, k = " + std::to_string(k));
  const auto histogram = m_histogram;
  const auto state = m_state;
  const Kokkos::View<std::int64_t, MemorySpace> bad = non_finite;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_init"), Policy(exec, 0, max_bins), KOKKOS_LAMBDA(Index b) {
        histogram(b) = 0;
        if (b == 0) {
          state(0) = 0;  // digits found so far
          state(1) = k;  // entries still to take at or below them
          if constexpr (Fold) bad() = 0;
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
      const auto policy = Team(exec, league, team_size).set_scratch_size(0, Kokkos::PerTeam(digit.bins * sizeof(int)));
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

  // Every entry above the threshold pattern T, and the first `ties` entries equal to it. One
  // 64-bit scan counts both: entries above in the low 32 bits, entries equal in the high ones.
  Kokkos::parallel_scan(
      A2SGD_LABEL("a2sgd::compress::topk_compact"), Policy(exec, 0, n),
      KOKKOS_LAMBDA(Index i, std::int64_t & before, bool final) {
        const float v = e(i);
        const std::uint32_t key = magnitude_bits(v);
        const auto threshold = static_cast<std::uint32_t>(state(0));
        const std::int64_t above = key > threshold, tie = key == threshold;
        if (final) {
          const std::int64_t above_before = before & 0xffffffff, ties_before = before >> 32, ties = state(1);
          if (above || (tie && ties_before < ties)) {
            out(above_before + (ties_before < ties ? ties_before : ties)) =
                (static_cast<std::uint64_t>(i) << 32) | detail::float_bits(v);
            if constexpr (Fold) e(i) = 0.0f;  // what is sent leaves the residual
          }
        }
        before += above | (tie << 32);
      });
}

}  // namespace a2sgd::compress::impl
