#include "TwoMeansStudy.hpp"

#include "CoreClock.hpp"

#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/compress/impl/TwoMeansKernels.hpp>
#include <a2sgd/core/impl/CacheEviction.hpp>

#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace a2sgd::bench {
namespace {

using compress::impl::TwoMeansKernel;
using compress::impl::TwoMeansPrefetch;
constexpr auto& prefetch = compress::impl::two_means_prefetch_forms;
static_assert(std::size(prefetch) == 3);

// The two-means pass alone, with error feedback (reads g and e) and plain (reads g), against the
// read ceilings of the same number of streams. Interleaved with the read ceilings on the same
// buffers, repeat by repeat: on a shared machine memory bandwidth drifts between the ceilings
// measured at the start and this point. Every timed pass starts with both buffers evicted from
// the caches (core/impl/CacheEviction.hpp).
class Study {
 public:
  Study(const Communicator& comm, const BenchConfig& c, const FloatView& g0, Index n)
      : m_comm(comm), m_c(c), m_g0(g0), m_n(n), m_e("a2sgd::bench::residual", static_cast<std::size_t>(n)) {
    Kokkos::deep_copy(m_e, 1e-3f);
    // Untimed: where the methods did not run A2SGD, the first large call of each variant times the
    // kernel's prefetch forms (impl/TwoMeansKernels.hpp), which no sample may include. Later
    // calls are timed too, and one in 16 runs another form: one or two of the samples.
    m_sink += two_means(m_exec, g0, m_e).sum_pos + two_means(m_exec, g0, ConstFloatView()).sum_pos;
    comm.barrier();
  }

  void run();
  void report(CsvRows& rows) const;

 private:
  // One variant's passes in a round: its read ceilings, the library's pass and, where the
  // AVX-512 kernel runs, that kernel with each form forced (which form the machine favours at the
  // time, and what the library's choice is worth).
  struct Pass {
    std::vector<double>* samples;
    std::function<void()> run;
  };
  template <bool Two>
  std::vector<Pass> passes();
  template <class Functor>
  void read(const Functor& functor);
  void timed_round(int r, const std::vector<Pass>& passes);
  void cached_round(int r, int v);
  double fastest(const std::deque<std::vector<double>>& t) const;
  std::string clock_note(double ef_cached_s, double plain_cached_s, CsvRows& rows) const;
  void report_forms(double read_s, double read_one_s, CsvRows& rows) const;

  const Communicator& m_comm;
  const BenchConfig& m_c;
  FloatView m_g0;
  Index m_n;
  FloatView m_e;
  ExecutionSpace m_exec;
  mutable double m_sink = 0.0;
  const bool m_evict = host_backend && impl::can_evict_caches;
  const bool m_forms = compress::impl::two_means_avx512_available();
  // Per form of each read ceiling (a deque: appending keeps the earlier forms' samples in place).
  std::deque<std::vector<double>> m_read, m_read_one;
  std::vector<double> m_ef, m_plain, m_ef_form[3], m_plain_form[3];
  // The library's kernel on data already in cache, in the same rounds: its own rate where memory
  // does not bound it. A pass can run at the memory's rate only if this is well above the read
  // ceiling. Without software prefetch: near the end of a small slice the prefetches would fetch
  // lines past it from memory.
  static constexpr int cached_calls = 32;
  const Index m_cached = std::min<Index>(m_n, Index(1) << 15);  // 128 KB per buffer: in L2
  std::vector<double> m_cached_s[2];                            // [0]: error feedback, seconds per call
  // The core's clock in the same rounds (CoreClock.hpp), so that the kernel's in-cache rate can
  // be read as cycles per value: a slow run is then either a lower clock or more cycles.
  std::vector<double> m_clock;
};

template <class Functor>
void Study::read(const Functor& functor) {
  const Index items = host_backend ? (m_n + ReadStreams<true>::block - 1) / ReadStreams<true>::block : m_n;
  double sum = 0.0;
  Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::bench::ceiling_read"), Policy(m_exec, 0, items), functor, sum);
  m_sink += sum;
}

template <bool Two>
std::vector<Study::Pass> Study::passes() {
  auto& t_ceiling = Two ? m_read : m_read_one;
  auto& t_library = Two ? m_ef : m_plain;
  auto& t_forced = Two ? m_ef_form : m_plain_form;
  const ConstFloatView residual = Two ? ConstFloatView(m_e) : ConstFloatView();
  std::vector<Pass> out;
  for_each_read_form<Two>(m_g0, m_e, m_n, [&](auto functor) {
    out.push_back({&t_ceiling.emplace_back(), [this, functor] { read(functor); }});
  });
  out.push_back({&t_library, [this, residual] { m_sink += two_means(m_exec, m_g0, residual).sum_pos; }});
  if (m_forms)
    for (int f = 0; f < 3; ++f)
      out.push_back(
          {&t_forced[f], [this, residual, f] {
             m_sink += compress::impl::two_means(m_exec, m_g0, residual, TwoMeansKernel::avx512, prefetch[f]).sum_pos;
           }});
  return out;
}

// Round r starts at pass r: over the rounds every pass takes every place in the order, so that
// whatever a pass leaves behind in the memory system falls on every pass alike instead of always
// on the same one. Every rank starts each pass together: at several ranks a kernel then shares
// the memory with the same kernel on the other ranks, not with whichever pass they have drifted to.
void Study::timed_round(int r, const std::vector<Pass>& passes) {
  const std::size_t buffer_bytes = sizeof(float) * static_cast<std::size_t>(m_n);
  for (std::size_t k = 0; k < passes.size(); ++k) {
    const Pass& pass = passes[(k + static_cast<std::size_t>(r)) % passes.size()];
    if (m_evict) {
      impl::evict_from_caches(m_g0.data(), buffer_bytes);
      impl::evict_from_caches(m_e.data(), buffer_bytes);
    }
    m_comm.barrier();
    Stopwatch clock;
    pass.run();
    if (r >= m_c.warmup) pass.samples->push_back(clock.seconds());
  }
}

void Study::cached_round(int r, int v) {
  const TwoMeansKernel kernel = m_forms ? TwoMeansKernel::avx512 : TwoMeansKernel::portable;
  const ConstFloatView g = Kokkos::subview(m_g0, std::make_pair(Index(0), m_cached));
  const ConstFloatView residual =
      v == 0 ? ConstFloatView(Kokkos::subview(m_e, std::make_pair(Index(0), m_cached))) : ConstFloatView();
  auto pass = [&] { return compress::impl::two_means(m_exec, g, residual, kernel, TwoMeansPrefetch::none).sum_pos; };
  m_sink += pass();  // one untimed call brings the slice into the cache
  m_comm.barrier();
  Stopwatch clock;
  for (int k = 0; k < cached_calls; ++k) m_sink += pass();
  if (r >= m_c.warmup) m_cached_s[v].push_back(clock.seconds() / cached_calls);
}

void Study::run() {
  const std::vector<Pass> variants[2] = {passes<true>(), passes<false>()};
  for (int r = 0; r < m_c.warmup + m_c.repeats; ++r) {
    for (int v = 0; v < 2; ++v) {
      timed_round(r, variants[v]);
      cached_round(r, v);
    }
    if (can_measure_clock && r >= m_c.warmup) m_clock.push_back(time_add_chain());
  }
}

// A ceiling: the fastest of its forms (the slowest rank's).
double Study::fastest(const std::deque<std::vector<double>>& t) const {
  double seconds = std::numeric_limits<double>::infinity();
  for (const auto& samples : t) seconds = std::min(seconds, median(samples));
  return slowest(m_comm, seconds);
}

std::string Study::clock_note(double ef_cached_s, double plain_cached_s, CsvRows& rows) const {
  if (!can_measure_clock) return {};
  // The slowest rank's chain, as the kernel times are the slowest rank's.
  const double chain_s = slowest(m_comm, median(m_clock));
  rows.row("reference", "core_clock", clock_chain_adds, m_comm.size(), 0, 0, 0, 0, 0, chain_s, 0, 0);
  const double hz = static_cast<double>(clock_chain_adds) / chain_s;
  const double groups = static_cast<double>(m_cached) / 16.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "; core clock %.2f GHz (a chain of dependent integer adds, same rounds): %.2f cycles per 16 "
                "values with error feedback, %.2f plain",
                hz / 1e9, ef_cached_s * hz / groups, plain_cached_s * hz / groups);
  return buf;
}

void Study::report_forms(double read_s, double read_one_s, CsvRows& rows) const {
  if (!m_forms) return;
  std::string line;
  for (const bool feedback : {true, false}) {
    line += feedback ? "with error feedback" : "; plain";
    for (int f = 0; f < 3; ++f) {
      const double s = slowest(m_comm, median(feedback ? m_ef_form[f] : m_plain_form[f]));
      rows.row("reference",
               std::string(feedback ? "two_means_ef_" : "two_means_plain_") + compress::impl::to_string(prefetch[f]),
               m_n, m_comm.size(), 0, 0, s, 0, 0, s, 0, 0);
      line += std::string(f ? ", " : " ") + compress::impl::to_string(prefetch[f]) + " " +
              std::to_string(std::lround(100.0 * (feedback ? read_s : read_one_s) / s)) + "%";
    }
    line += std::string(" (chosen: ") + compress::impl::to_string(compress::impl::two_means_prefetch_chosen(feedback)) +
            ")";
  }
  if (m_comm.rank() == 0)
    std::printf("two-means AVX-512 kernel by software prefetch form, %% of the same read ceilings: %s\n", line.c_str());
}

void Study::report(CsvRows& rows) const {
  const int p = m_comm.size();
  const double values = static_cast<double>(m_n), cached = static_cast<double>(m_cached);
  const double read_s = fastest(m_read), read_one_s = fastest(m_read_one);
  const double ef_s = slowest(m_comm, median(m_ef)), plain_s = slowest(m_comm, median(m_plain));
  const double ef_gbs = 8.0 * values / ef_s / 1e9, plain_gbs = 4.0 * values / plain_s / 1e9;
  const double read_gbs = 8.0 * values / read_s / 1e9, read_one_gbs = 4.0 * values / read_one_s / 1e9;
  rows.row("reference", "two_means_ef", m_n, p, 0, 0, ef_s, 0, 0, ef_s, 0, 0);
  rows.row("reference", "two_means_plain", m_n, p, 0, 0, plain_s, 0, 0, plain_s, 0, 0);
  rows.row("reference", "read_interleaved", m_n, p, 0, 0, 0, 0, 0, read_s, 0, 0);
  rows.row("reference", "read_one_interleaved", m_n, p, 0, 0, 0, 0, 0, read_one_s, 0, 0);
  const double ef_cached_s = slowest(m_comm, median(m_cached_s[0]));
  const double plain_cached_s = slowest(m_comm, median(m_cached_s[1]));
  const double ef_cached_gbs = 8.0 * cached / ef_cached_s / 1e9, plain_cached_gbs = 4.0 * cached / plain_cached_s / 1e9;
  rows.row("reference", "two_means_ef_cached", m_cached, p, 0, 0, ef_cached_s, 0, 0, ef_cached_s, 0, 0);
  rows.row("reference", "two_means_plain_cached", m_cached, p, 0, 0, plain_cached_s, 0, 0, plain_cached_s, 0, 0);
  const std::string clock = clock_note(ef_cached_s, plain_cached_s, rows);
  if (m_comm.rank() == 0)
    std::printf(
        "two-means pass, interleaved with read ceilings on the same buffers%s: with error feedback %.1f GB/s "
        "(%.0f%% of the two-stream read ceiling, %.1f GB/s), plain %.1f GB/s (%.0f%% of the one-stream read "
        "ceiling, %.1f GB/s)%s\n"
        "two-means kernel in cache (the first %lld values, no software prefetch, %d calls back to back, same "
        "rounds): with error feedback "
        "%.1f GB/s (%.2fx the two-stream read ceiling), plain %.1f GB/s (%.2fx the one-stream read ceiling)%s\n",
        m_evict ? ", every pass starting with them evicted from the caches" : " (caches not evicted in this build)",
        ef_gbs, 100.0 * ef_gbs / read_gbs, read_gbs, plain_gbs, 100.0 * plain_gbs / read_one_gbs, read_one_gbs,
        std::isfinite(m_sink) ? "" : " (non-finite sums)", static_cast<long long>(m_cached), cached_calls,
        ef_cached_gbs, ef_cached_gbs / read_gbs, plain_cached_gbs, plain_cached_gbs / read_one_gbs, clock.c_str());
  report_forms(read_s, read_one_s, rows);
}

}  // namespace

void two_means_study(const Communicator& comm, const BenchConfig& c, const FloatView& g0, Index n, CsvRows& rows) {
  Study study(comm, c, g0, n);
  study.run();
  study.report(rows);
}

}  // namespace a2sgd::bench
