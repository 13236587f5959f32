#pragma once
// Software prefetch for the host's streaming block functions (internal).
//
// A rank alone on a socket's memory bus: there a plain streaming loop ran at 60-70% of the
// ceilings a2sgd-bench measures with software prefetch (its read ceiling is the fastest of its
// prefetch forms), so the core's own prefetching kept too few lines in flight. Asking for each
// 32-float chunk's lines prefetch_distance bytes ahead recovers most of that (on the AMD EPYC
// development machine, one rank, 16M floats, medians of 15 calls, four rounds: a count over one
// stream 2.5-3.2 ms without, 1.7-2.4 ms with; e += g 4.5-6.2 ms without, 4.3-5.4 ms with). With
// two or more ranks per socket every kernel is bound by the shared bus either way. The distance:
// 8 KiB was among the fastest of 2, 4, 8 and 16 KiB in those rounds. A prefetch never faults, so
// it may point past a buffer's end.
//
// Host block functions only (impl/HostClones.hpp); device code never calls these.

#include <cstdint>

namespace a2sgd::impl {

/// Bytes ahead of the current chunk that the streaming kernels prefetch.
inline constexpr std::uintptr_t prefetch_distance = 8192;

/// Prefetches the two cache lines of the 32-float chunk Distance bytes after p into every cache
/// level; Write: for a store (the line is then fetched for ownership).
template <bool Write = false, std::uintptr_t Distance = prefetch_distance>
inline void prefetch_chunk(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  // Integer arithmetic: the address may lie past the end of the buffer.
  const auto ahead = reinterpret_cast<std::uintptr_t>(p) + Distance;
  __builtin_prefetch(reinterpret_cast<const void*>(ahead), Write ? 1 : 0, 3);
  __builtin_prefetch(reinterpret_cast<const void*>(ahead + 64), Write ? 1 : 0, 3);
#else
  (void)p;
#endif
}

}  // namespace a2sgd::impl
