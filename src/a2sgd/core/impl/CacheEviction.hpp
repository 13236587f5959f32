#pragma once
// Dropping host buffers from the CPU caches before a timed pass (internal), so that passes that
// are compared all start from the same state: their data in memory and in no cache. Without it a
// pass starts from whatever the previous one left: at sizes near the last-level cache (16M floats
// are 64 MB per stream) part of a buffer can still be cached, and how much depends on which pass
// came before and how it fetched its data. Used where kernels are timed against each other: the
// two-means pass's choice of a prefetch form (compress/TwoMeans.cpp) and a2sgd-bench.

#include <cstddef>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define A2SGD_CACHE_EVICTION
#include <emmintrin.h>
#endif

namespace a2sgd::impl {

/// Whether evict_from_caches() does anything in this build: x86-64 (clflush, part of SSE2 and so
/// of every x86-64 CPU) with GCC or Clang.
#ifdef A2SGD_CACHE_EVICTION
inline constexpr bool can_evict_caches = true;
#else
inline constexpr bool can_evict_caches = false;
#endif

/// Writes back and invalidates the lines of host memory [data, data + bytes) in every cache level
/// of the machine, then fences, so that a pass timed next finds none of them cached. No effect
/// where can_evict_caches is false. `data` must be host memory; the contents do not change.
inline void evict_from_caches(const void* data, std::size_t bytes) {
#ifdef A2SGD_CACHE_EVICTION
  if (bytes == 0) return;
  constexpr std::size_t line = 64;  // the smallest x86-64 cache line: no line is skipped
  const char* p = static_cast<const char*>(data);
  for (std::size_t offset = 0; offset < bytes; offset += line) _mm_clflush(p + offset);
  _mm_clflush(p + bytes - 1);  // the last line when data is not line-aligned
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace a2sgd::impl
