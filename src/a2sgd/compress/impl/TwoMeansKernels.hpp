#pragma once
// The two-means pass with a chosen host kernel and prefetch form, for tests and benchmarks
// (internal).

#include <a2sgd/compress/TwoMeans.hpp>

namespace a2sgd::compress::impl {

/// Host kernels of the two-means pass; device backends have one (an entry per thread).
/// - `portable`: a SIMD reduction that the compiler vectorises (per-ISA clones with GCC).
/// - `avx512`: AVX-512 intrinsics. Compares in float, 16 values per instruction, counts by
///   popcount of the compare masks on the integer units, and merge-masked double adds: about half
///   the vector instructions of what the compiler makes of the portable loop.
/// `two_means()` takes `avx512` where it is available, else `portable`.
enum class TwoMeansKernel { portable, avx512 };

/// Software prefetch of the `avx512` kernel, 8 KB ahead in each stream it reads (the portable
/// kernel and device backends have none). The forms give the same bits; only their speed differs.
/// - `automatic`: the form chosen for this variant (error feedback or plain) by timing all three
///   on the data of the first call with at least two_means_calibration_values entries; until
///   then, non-temporal with error feedback and all levels without.
enum class TwoMeansPrefetch { automatic, none, all_levels, non_temporal };

/// Entries from which the first call of a variant times the prefetch forms (16 MB per stream:
/// beyond the caches whose prefetchers the choice is about).
inline constexpr Index two_means_calibration_values = Index(1) << 22;

/// Entries the timing reads per pass at most (64 MB per stream), so that it costs at most nine
/// such passes once per process.
inline constexpr Index two_means_calibration_window = Index(1) << 24;

/// Name of a form, for reports ("automatic", "none", "all_levels", "non_temporal").
const char* to_string(TwoMeansPrefetch prefetch) noexcept;

/// The form `automatic` stands for in this process, for the error-feedback or the plain
/// variant: `automatic` until the first call that times them (and always where the avx512 kernel
/// does not run).
TwoMeansPrefetch two_means_prefetch_chosen(bool error_feedback) noexcept;

/// Whether this build has the avx512 kernel (x86-64, GCC or Clang, host SIMD clones enabled) and
/// the CPU runs it.
bool two_means_avx512_available() noexcept;

/// two_means() with the given host kernel (ignored on device backends) and prefetch form
/// (ignored by the portable kernel).
/// @throws InvalidArgument when `avx512` is requested but not available.
TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                         TwoMeansKernel kernel, TwoMeansPrefetch prefetch = TwoMeansPrefetch::automatic);

}  // namespace a2sgd::compress::impl
