#pragma once
// The host core's single-precision FMA peak, measured: the ceiling of any GEMM on one thread.

#include <vector>

namespace a2sgd::apps {

/// One instruction set's measured peak.
struct FmaPeak {
  const char* isa;  ///< "avx512" or "avx2"
  double gflops;    ///< fp32 GFLOP/s (an FMA counts two), the best of at least 200 short runs
};

/// The peak of each FMA instruction set this build and CPU have (widest first): independent
/// fused multiply-adds on registers, no memory traffic. Empty where the build has none of them
/// (not x86-64 with GCC or Clang, or a device build).
std::vector<FmaPeak> measure_fma_peaks(int repeats);

}  // namespace a2sgd::apps
