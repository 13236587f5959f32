#include "FmaPeak.hpp"

#include <a2sgd/core/Accounting.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define A2SGD_BENCH_FMA_X86
#include <immintrin.h>
#endif

namespace a2sgd::apps {
namespace {

#ifdef A2SGD_BENCH_FMA_X86
// Independent accumulator chains, more than FMA latency (4 cycles) times FMA pipes (2) on
// current x86 cores, so the loop is bound by FMA throughput: 16 of AVX-512's 32 registers, 12 of
// AVX2's 16 (with the two constants, 16 chains would spill). The fold over a constant-index array
// keeps every chain in a register. The factor just below 1 and the small addend keep the values
// normal and bounded, so no denormal assist slows a chain.
constexpr std::size_t chains_avx512 = 16, chains_avx2 = 12;

// The lanes' sum through memory (GCC 12's reduce intrinsics trip -Wuninitialized, GCC bug 105593).
template <class Vector>
float lane_sum(const Vector& v) {
  alignas(64) float lane[sizeof(Vector) / sizeof(float)];
  std::memcpy(lane, &v, sizeof(Vector));
  float s = 0.0f;
  for (float x : lane) s += x;
  return s;
}

template <std::size_t... K>
__attribute__((target("avx512f"))) float fma_avx512(long iterations, std::index_sequence<K...>) {
  const __m512 factor = _mm512_set1_ps(0.999999f), addend = _mm512_set1_ps(1e-6f);
  __m512 acc[sizeof...(K)] = {_mm512_set1_ps(static_cast<float>(K))...};
  for (long i = 0; i < iterations; ++i) ((acc[K] = _mm512_fmadd_ps(acc[K], factor, addend)), ...);
  __m512 sum = _mm512_setzero_ps();
  ((sum = _mm512_add_ps(sum, acc[K])), ...);
  return lane_sum(sum);
}

template <std::size_t... K>
__attribute__((target("avx2,fma"))) float fma_avx2(long iterations, std::index_sequence<K...>) {
  const __m256 factor = _mm256_set1_ps(0.999999f), addend = _mm256_set1_ps(1e-6f);
  __m256 acc[sizeof...(K)] = {_mm256_set1_ps(static_cast<float>(K))...};
  for (long i = 0; i < iterations; ++i) ((acc[K] = _mm256_fmadd_ps(acc[K], factor, addend)), ...);
  __m256 sum = _mm256_setzero_ps();
  ((sum = _mm256_add_ps(sum, acc[K])), ...);
  return lane_sum(sum);
}

// Best GFLOP/s of at least 200 runs of kernel(iterations) doing `flops_per_iteration` each. A
// peak is a ceiling: another tenant on the core only ever slows a run, so the fastest run is the
// closest to the core's rate. Each run is short (about 0.1 ms), as short as the GEMMs it bounds,
// so that a run is as likely as they are to fit between two preemptions of a shared core.
template <class Kernel>
double best_gflops(int repeats, double flops_per_iteration, Kernel&& kernel) {
  constexpr long iterations = 1L << 15;  // about 0.1 ms per run with two 256-bit FMA pipes
  std::vector<double> rate;
  volatile float sink = 0.0f;  // the result is used, so the loop cannot be dropped
  for (int r = 0; r < std::max(repeats, 200) + 1; ++r) {
    Stopwatch clock;
    sink = sink + kernel(iterations);
    const double s = clock.seconds();
    if (r > 0) rate.push_back(flops_per_iteration * static_cast<double>(iterations) / s * 1e-9);
  }
  return *std::max_element(rate.begin(), rate.end());
}
#endif

}  // namespace

std::vector<FmaPeak> measure_fma_peaks(int repeats) {
  std::vector<FmaPeak> peaks;
#ifdef A2SGD_BENCH_FMA_X86
  if (__builtin_cpu_supports("avx512f"))
    peaks.push_back({"avx512", best_gflops(repeats, chains_avx512 * 16 * 2.0, [](long it) {
                       return fma_avx512(it, std::make_index_sequence<chains_avx512>());
                     })});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    peaks.push_back({"avx2", best_gflops(repeats, chains_avx2 * 8 * 2.0, [](long it) {
                       return fma_avx2(it, std::make_index_sequence<chains_avx2>());
                     })});
#else
  (void)repeats;
#endif
  return peaks;
}

}  // namespace a2sgd::apps
