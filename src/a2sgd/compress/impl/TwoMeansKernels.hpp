#pragma once
// The two-means pass with a chosen host kernel, for tests and benchmarks (internal).

#include <a2sgd/compress/TwoMeans.hpp>

namespace a2sgd::compress::impl {

/// Host kernels of the two-means pass; device backends have one (an entry per thread).
/// - `portable`: a SIMD reduction that the compiler vectorises (per-ISA clones with GCC).
/// - `avx512`: AVX-512 intrinsics. Compares in float, 16 values per instruction, counts by
///   popcount of the compare masks on the integer units, and merge-masked double adds: about half
///   the vector instructions of what the compiler makes of the portable loop.
/// `two_means()` takes `avx512` where it is available, else `portable`.
enum class TwoMeansKernel { portable, avx512 };

/// Whether this build has the avx512 kernel (x86-64, GCC or Clang, host SIMD clones enabled) and
/// the CPU runs it.
bool two_means_avx512_available() noexcept;

/// two_means() with the given host kernel (ignored on device backends).
/// @throws InvalidArgument when `avx512` is requested but not available.
TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                         TwoMeansKernel kernel);

}  // namespace a2sgd::compress::impl
