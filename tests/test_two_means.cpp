#include "TestingCatch.hpp"

#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/compress/impl/FormSelector.hpp>
#include <a2sgd/compress/impl/TwoMeansKernels.hpp>
#include <a2sgd/core/Error.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <sys/mman.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define A2SGD_HAVE_VALGRIND_H 1
#endif

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

using compress::impl::TwoMeansKernel;

// Every host kernel this build and CPU can run; each test below runs once per kernel, since the
// default picks one of them and the others would go unchecked.
std::vector<TwoMeansKernel> host_kernels() {
  std::vector<TwoMeansKernel> kernels{TwoMeansKernel::portable};
  if (compress::impl::two_means_avx512_available()) kernels.push_back(TwoMeansKernel::avx512);
  return kernels;
}

const char* kernel_name(TwoMeansKernel kernel) {
  return kernel == TwoMeansKernel::avx512 ? "avx512" : "portable";
}

// Plain host reference: a = g + e in float (as the kernel does), sums in double.
TwoMeansResult reference(const std::vector<float>& g, const std::vector<float>& e) {
  TwoMeansResult r;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const float a = e.empty() ? g[i] : g[i] + e[i];
    if (!std::isfinite(a)) {
      ++r.non_finite;
    } else if (a > 0) {
      r.sum_pos += a;
      ++r.count_pos;
    } else if (a < 0) {
      r.sum_neg += a;
      ++r.count_neg;
    }
  }
  return r;
}

std::vector<float> random_values(std::size_t n, unsigned seed, float zero_fraction = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.1f, 2.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = unit(rng) < zero_fraction ? 0.0f : normal(rng);
  return v;
}

void check_matches(const TwoMeansResult& got, const TwoMeansResult& want, std::size_t n) {
  CHECK(got.count_pos == want.count_pos);
  CHECK(got.count_neg == want.count_neg);
  CHECK(got.non_finite == want.non_finite);
  // Both sum the same float values (exact in double; g + e is rounded to float identically) in
  // double, in different orders (lanes, blocks, threads): each is within gamma64(n) sum |a| of the
  // exact sum, and within one sign set sum |a| = |sum|. The means add one division each.
  const double sum_tol = 2 * gamma64(double(n));
  const double mean_tol = sum_tol + 2 * u64;
  CHECK_THAT(got.sum_pos, WithinAbs(want.sum_pos, sum_tol * std::abs(want.sum_pos)));
  CHECK_THAT(got.sum_neg, WithinAbs(want.sum_neg, sum_tol * std::abs(want.sum_neg)));
  CHECK_THAT(got.mean_pos(), WithinAbs(want.mean_pos(), mean_tol * std::abs(want.mean_pos())));
  CHECK_THAT(got.mean_neg(), WithinAbs(want.mean_neg(), mean_tol * std::abs(want.mean_neg())));
}

}  // namespace

TEST_CASE("two_means matches a host reference on random data of awkward sizes", "[two_means]") {
  const auto kernel = GENERATE(from_range(host_kernels()));
  INFO("kernel " << kernel_name(kernel));
  const auto two_means = [kernel](const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
    return compress::impl::two_means(exec, g, e, kernel);
  };
  // Sizes around the kernels' lane (8), iteration (32) and block (4096) granularity, and primes.
  for (std::size_t n : {1u, 2u, 7u, 8u, 9u, 31u, 32u, 33u, 63u, 4095u, 4096u, 4097u, 12289u, 100003u, 1000003u}) {
    INFO("n = " << n);
    const auto g = random_values(n, 1 + static_cast<unsigned>(n), 0.05f);
    const auto e = random_values(n, 7 + static_cast<unsigned>(n), 0.05f);
    check_matches(two_means(ExecutionSpace(), to_device(g), to_device(e)), reference(g, e), n);
    // Error feedback off: a = g.
    check_matches(two_means(ExecutionSpace(), to_device(g), ConstFloatView()), reference(g, {}), n);
  }
}

TEST_CASE("two_means edge cases", "[two_means]") {
  const auto kernel = GENERATE(from_range(host_kernels()));
  INFO("kernel " << kernel_name(kernel));
  const auto two_means = [kernel](const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e) {
    return compress::impl::two_means(exec, g, e, kernel);
  };
  const ExecutionSpace exec;
  SECTION("all positive: the negative mean is 0 with count 0") {
    const std::vector<float> g(1001, 0.5f), e(1001, 0.25f);
    const auto r = two_means(exec, to_device(g), to_device(e));
    CHECK(r.count_pos == 1001);
    CHECK(r.count_neg == 0);
    CHECK(r.mean_pos() == 0.75);
    CHECK(r.mean_neg() == 0.0);
  }
  SECTION("all negative") {
    const std::vector<float> g(333, -2.0f);
    const auto r = two_means(exec, to_device(g), ConstFloatView());
    CHECK(r.count_neg == 333);
    CHECK(r.count_pos == 0);
    CHECK(r.mean_neg() == -2.0);
    CHECK(r.mean_pos() == 0.0);
  }
  SECTION("all zero, and g + e cancelling to zero, belong to neither set") {
    const std::vector<float> g(4097, 1.5f), e(4097, -1.5f);
    const auto r = two_means(exec, to_device(g), to_device(e));
    CHECK(r.count_pos == 0);
    CHECK(r.count_neg == 0);
    CHECK(r.mean_pos() == 0.0);
    CHECK(r.mean_neg() == 0.0);
    CHECK(r.non_finite == 0);
  }
  SECTION("n = 1") {
    const auto r = two_means(exec, to_device({-3.0f}), to_device({1.0f}));
    CHECK(r.count_neg == 1);
    CHECK(r.mean_neg() == -2.0);
  }
  SECTION("n = 0") {
    const auto r = two_means(exec, FloatView("g", 0), FloatView("e", 0));
    CHECK(r.count_pos + r.count_neg + r.non_finite == 0);
    CHECK(r.mean_pos() == 0.0);
    CHECK(r.mean_neg() == 0.0);
  }
  SECTION("NaN and Inf are counted, not averaged") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> g = random_values(9000, 3);
    g[17] = nan;
    g[4096] = inf;
    g[8999] = -inf;
    CHECK(two_means(exec, to_device(g), ConstFloatView()).non_finite == 3);
    // A NaN produced by g + e (Inf + -Inf) counts too, and so does a lone NaN with n = 1.
    std::vector<float> e(g.size(), 0.0f);
    g[5000] = inf;
    e[5000] = -inf;
    CHECK(two_means(exec, to_device(g), to_device(e)).non_finite == 4);
    CHECK(two_means(exec, to_device({nan}), ConstFloatView()).non_finite == 1);
    // A lone NaN among finite values, with no infinity to make a sum non-finite, at the start
    // and the middle of a vector iteration and in a block's tail.
    for (std::size_t at : {std::size_t(0), std::size_t(4096 + 45), std::size_t(8999)}) {
      INFO("NaN at " << at);
      std::vector<float> h = random_values(9000, 4);
      h[at] = nan;
      CHECK(two_means(exec, to_device(h), ConstFloatView()).non_finite == 1);
      CHECK(two_means(exec, to_device(h), to_device(std::vector<float>(h.size(), 0.5f))).non_finite == 1);
    }
    CHECK(two_means(exec, to_device({-inf}), ConstFloatView()).non_finite == 1);
  }
  SECTION("mismatched lengths are an error") {
    CHECK_THROWS_AS(two_means(exec, FloatView("g", 10), FloatView("e", 9)), InvalidArgument);
  }
}

TEST_CASE("two_means runs the AVX-512 kernel where it is available, and only there", "[two_means]") {
  const ExecutionSpace exec;
  const auto g = random_values(50001, 11), e = random_values(50001, 12);
  if (!compress::impl::two_means_avx512_available()) {
    CHECK_THROWS_AS(compress::impl::two_means(exec, to_device(g), to_device(e), TwoMeansKernel::avx512),
                    InvalidArgument);
    WARN("no AVX-512 kernel in this build or on this CPU: the portable kernel alone is tested");
    return;
  }
  // The same additions in the same order: bit-for-bit the same sums as the explicit choice.
  const auto chosen = two_means(exec, to_device(g), to_device(e));
  const auto avx512 = compress::impl::two_means(exec, to_device(g), to_device(e), TwoMeansKernel::avx512);
  CHECK(chosen.sum_pos == avx512.sum_pos);
  CHECK(chosen.sum_neg == avx512.sum_neg);
  CHECK(chosen.count_pos == avx512.count_pos);
  CHECK(chosen.count_neg == avx512.count_neg);
}

namespace {

using compress::impl::TwoMeansPrefetch;

void check_same_bits(const TwoMeansResult& got, const TwoMeansResult& want) {
  CHECK(got.sum_pos == want.sum_pos);
  CHECK(got.sum_neg == want.sum_neg);
  CHECK(got.count_pos == want.count_pos);
  CHECK(got.count_neg == want.count_neg);
  CHECK(got.non_finite == want.non_finite);
}

}  // namespace

TEST_CASE("two_means gives the same bits with every prefetch form", "[two_means]") {
  const auto kernel = GENERATE(from_range(host_kernels()));
  INFO("kernel " << kernel_name(kernel));
  const ExecutionSpace exec;
  // Prefetching reads ahead of the loop, past a block's and the buffer's end; it must change no
  // sum and no count, including the tails (sizes not multiples of the 32-value iteration).
  for (std::size_t n : {33u, 4097u, 100003u, 1000003u}) {
    INFO("n = " << n);
    const auto g = to_device(random_values(n, 21 + static_cast<unsigned>(n), 0.05f));
    const auto e = to_device(random_values(n, 22 + static_cast<unsigned>(n), 0.05f));
    for (const bool feedback : {true, false}) {
      INFO("error feedback " << feedback);
      const ConstFloatView residual = feedback ? ConstFloatView(e) : ConstFloatView();
      const auto want = compress::impl::two_means(exec, g, residual, kernel, TwoMeansPrefetch::none);
      for (auto form : {TwoMeansPrefetch::all_levels, TwoMeansPrefetch::non_temporal, TwoMeansPrefetch::automatic}) {
        INFO("prefetch " << compress::impl::to_string(form));
        check_same_bits(compress::impl::two_means(exec, g, residual, kernel, form), want);
      }
    }
  }
}

namespace {

// Under valgrind (the dashboard's memcheck of this test) 8 GB of instrumented memory traffic would
// take many minutes.
bool under_valgrind() {
#ifdef A2SGD_HAVE_VALGRIND_H
  if (RUNNING_ON_VALGRIND) return true;
#endif
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

// Long double reference (64-bit significand): its own error, at most n 2^-64 sum |a|, is far below
// the double sums' bound.
struct LongDoubleSums {
  long double pos = 0, neg = 0, abs_pos = 0, abs_neg = 0;
  std::int64_t count_pos = 0, count_neg = 0;
};

LongDoubleSums long_double_sums(const std::vector<float>& g, const std::vector<float>& e) {
  LongDoubleSums r;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const float a = e.empty() ? g[i] : g[i] + e[i];
    if (a > 0) {
      r.pos += a;
      ++r.count_pos;
    } else if (a < 0) {
      r.neg += a;
      ++r.count_neg;
    }
  }
  r.abs_pos = r.pos;
  r.abs_neg = -r.neg;
  return r;
}

// The accuracy contract: each sum within gamma64(n) of its magnitude (every entry of one set has
// the same sign) of the exact sum, whatever the order of the lanes and blocks.
void check_contract(const TwoMeansResult& got, const LongDoubleSums& want, std::size_t n) {
  const long double bound = gamma64(double(n)) + double(n) * 0x1p-64;
  CHECK(got.count_pos == want.count_pos);
  CHECK(got.count_neg == want.count_neg);
  CHECK(std::abs(static_cast<long double>(got.sum_pos) - want.pos) <= bound * want.abs_pos);
  CHECK(std::abs(static_cast<long double>(got.sum_neg) - want.neg) <= bound * want.abs_neg);
}

}  // namespace

TEST_CASE("calls of at least the calibration size choose the AVX-512 kernel's prefetch form", "[two_means]") {
  const ExecutionSpace exec;
  if (under_valgrind()) {
    WARN("skipped under valgrind: the first choice times 15 passes over 32 MB");
    return;
  }
  const Index large = compress::impl::two_means_calibration_values;
  const auto g = to_device(random_values(static_cast<std::size_t>(large), 31));
  const auto e = to_device(random_values(static_cast<std::size_t>(large), 32));
  for (const bool feedback : {true, false}) {
    INFO("error feedback " << feedback);
    const ConstFloatView residual = feedback ? ConstFloatView(e) : ConstFloatView();
    const ConstFloatView head = Kokkos::subview(g, std::make_pair(Index(0), large - 1));
    const ConstFloatView head_residual =
        feedback ? ConstFloatView(Kokkos::subview(e, std::make_pair(Index(0), large - 1))) : ConstFloatView();
    if (compress::impl::two_means_prefetch_chosen(feedback) == TwoMeansPrefetch::automatic) {
      // One entry short of the size that is timed: nothing is chosen yet.
      check_same_bits(two_means(exec, head, head_residual),
                      compress::impl::two_means(exec, head, head_residual, TwoMeansKernel::portable));
      CHECK(compress::impl::two_means_prefetch_chosen(feedback) == TwoMeansPrefetch::automatic);
    }
    // Enough calls for the first timing, several chosen-form calls and an exploring one: each
    // gives the bits of the explicit AVX-512 kernel (or the portable one where that is all).
    const auto kernel =
        compress::impl::two_means_avx512_available() ? TwoMeansKernel::avx512 : TwoMeansKernel::portable;
    const auto want = compress::impl::two_means(exec, g, residual, kernel, TwoMeansPrefetch::none);
    for (int call = 0; call < 2 * compress::impl::FormSelector::explore_period; ++call)
      check_same_bits(two_means(exec, g, residual), want);
    const auto chosen = compress::impl::two_means_prefetch_chosen(feedback);
    INFO("chosen " << compress::impl::to_string(chosen));
    if (!compress::impl::two_means_avx512_available())
      CHECK(chosen == TwoMeansPrefetch::automatic);  // nothing to choose: no software prefetch
    else
      CHECK(chosen != TwoMeansPrefetch::automatic);
  }
}

TEST_CASE("two_means keeps the double-precision accuracy contract on adversarial data", "[two_means]") {
  const ExecutionSpace exec;
  SECTION("a few huge values among a million tiny ones: the tiny ones still count") {
    const auto kernel = GENERATE(from_range(host_kernels()));
    INFO("kernel " << kernel_name(kernel));
    // Summed in float, 1 + 2^-30 is 1: the tiny values (2^-30 each, 1e-3 of the total together)
    // would vanish, 10^7 times the double bound.
    const std::size_t n = 1000003;
    std::vector<float> g(n, 0x1p-30f), e(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i)
      if (i % 2 == 1) g[i] = -0x1p-30f;
    for (std::size_t i : {std::size_t(0), std::size_t(4096 * 7 + 3), n - 1}) g[i] = 1.0f;
    for (std::size_t i : {std::size_t(5), std::size_t(300001)}) g[i] = -3.0f;
    const auto want = long_double_sums(g, e);
    check_contract(compress::impl::two_means(exec, to_device(g), to_device(e), kernel), want, n);
    check_contract(compress::impl::two_means(exec, to_device(g), ConstFloatView(), kernel), want, n);
  }
  SECTION("all-equal values: the sums are exact") {
    const auto kernel = GENERATE(from_range(host_kernels()));
    INFO("kernel " << kernel_name(kernel));
    // fl(0.1f + 0.2f) times up to 2^14 needs 38 bits: every partial sum is exact in double.
    const std::size_t n = 3 * 4096 + 5;
    const std::vector<float> g(n, 0.1f), e(n, 0.2f);
    const auto r = compress::impl::two_means(exec, to_device(g), to_device(e), kernel);
    CHECK(r.count_pos == static_cast<std::int64_t>(n));
    CHECK(static_cast<long double>(r.sum_pos) == long_double_sums(g, e).pos);
    CHECK(r.mean_pos() == static_cast<double>(0.1f + 0.2f));
  }
  SECTION("more than 2^31 entries, where memory allows: counts and sums past 32 bits") {
    // 2^31 + 4099 floats (8.6 GB), error feedback off. Needs 12 GB available, else skipped.
    const std::size_t n = (std::size_t(1) << 31) + 4099;
    std::size_t available_kb = 0;
    {
      std::ifstream meminfo("/proc/meminfo");
      std::string key;
      std::size_t value = 0;
      std::string unit;
      while (meminfo >> key >> value >> unit)
        if (key == "MemAvailable:") available_kb = value;
    }
    if (under_valgrind()) available_kb = 0;
    if (address_sanitizer_build) available_kb = 0;  // its shadow memory would add another gigabyte
    if (available_kb < (std::size_t(12) << 20)) {
      WARN("skipped: needs 12 GB of available memory, " << available_kb / 1024
                                                        << " MB available (none counts under valgrind or ASan)");
      return;
    }
    // Transparent huge pages where the kernel offers them: 4,000 page faults instead of 2 million.
    const std::size_t bytes = n * sizeof(float);
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    madvise(memory, bytes, MADV_HUGEPAGE);
    struct Unmap {
      void* p;
      std::size_t size;
      ~Unmap() { munmap(p, size); }
    } unmap{memory, bytes};
    const Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
        static_cast<float*>(memory), n);
    FloatView g = Kokkos::create_mirror_view(MemorySpace(), host);
    Kokkos::deep_copy(g, 1.0f);
    // A negative block at the very end, beyond index 2^31.
    Kokkos::deep_copy(Kokkos::subview(g, std::make_pair(n - 99, n)), -2.0f);
    const auto r = two_means(exec, g, ConstFloatView());
    CHECK(r.count_pos == static_cast<std::int64_t>(n - 99));
    CHECK(r.count_neg == 99);
    CHECK(r.sum_pos == static_cast<double>(n - 99));  // integers below 2^53: exact
    CHECK(r.sum_neg == -198.0);
  }
}
