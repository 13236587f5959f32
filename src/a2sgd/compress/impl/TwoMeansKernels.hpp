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

/// Software prefetch of the `avx512` kernel, ahead in each stream it reads by 4 KB with error
/// feedback and 8 KB without (the portable kernel and device backends have none). The forms give
/// the same bits; only their speed differs.
/// - `automatic`: per variant (error feedback or plain), a form chosen from timings of the calls
///   of at least two_means_calibration_values entries (impl/FormSelector.hpp). The first such call
///   times all three alternately on a window of its data (each pass starting with the window
///   evicted from the caches, on x86-64) and chooses non-temporal unless another form was at least
///   5% faster; every later one is timed, one in 16 of them running another form, whose timing is
///   compared with the chosen form's calls just before it, so that the choice follows the
///   machine. Smaller calls take the current choice untimed; before there is one, non-temporal.
enum class TwoMeansPrefetch { automatic, none, all_levels, non_temporal };

/// The forms `automatic` chooses among.
inline constexpr TwoMeansPrefetch two_means_prefetch_forms[] = {TwoMeansPrefetch::none, TwoMeansPrefetch::all_levels,
                                                                TwoMeansPrefetch::non_temporal};

/// Entries from which a call is timed for the choice (16 MB per stream; the data of smaller calls
/// may sit partly in a cache, where a timing says little about the memory streams the choice is
/// for).
inline constexpr Index two_means_calibration_values = Index(1) << 22;

/// Entries the first timing of the forms reads per pass at most (64 MB per stream): 15 passes
/// once per process and variant.
inline constexpr Index two_means_calibration_window = Index(1) << 24;

/// Name of a form, for reports ("automatic", "none", "all_levels", "non_temporal").
const char* to_string(TwoMeansPrefetch prefetch) noexcept;

/// The form `automatic` stands for now in this process, for the error-feedback or the plain
/// variant: `automatic` until a call has timed the forms (and always where the avx512 kernel
/// does not run).
TwoMeansPrefetch two_means_prefetch_chosen(bool error_feedback);

/// Whether this build has the avx512 kernel (x86-64, GCC or Clang, host SIMD clones enabled) and
/// the CPU runs it.
bool two_means_avx512_available() noexcept;

/// two_means() with the given host kernel (ignored on device backends) and prefetch form
/// (ignored by the portable kernel).
/// @throws InvalidArgument when `avx512` is requested but not available.
TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                         TwoMeansKernel kernel, TwoMeansPrefetch prefetch = TwoMeansPrefetch::automatic);

}  // namespace a2sgd::compress::impl
