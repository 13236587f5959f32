#pragma once
// Runtime ISA dispatch for host-only block functions (internal).
//
// A plain function over raw pointers marked A2SGD_HOST_CLONES is compiled for AVX-512, AVX2 and
// the baseline x86-64 ISA and the best one is picked at load time (GCC/Clang target_clones), so a
// portable binary still converts and adds 8 or 16 values per instruction where the CPU can. Only
// for host backends: device code never calls these functions (in device builds they are unused,
// hence [[maybe_unused]]). Configuring with
// A2SGD_ENABLE_HOST_CLONES=OFF compiles them for the baseline ISA alone (the portability run).
// GCC only: Clang (14) does not multiversion function templates, so a Clang build (the sanitizer
// and fuzzing builds) compiles these functions for the baseline ISA.
#if defined(A2SGD_OMP_SIMD) && defined(A2SGD_HOST_CLONES_ENABLED) && defined(__x86_64__) && defined(__GNUC__) && \
    !defined(__clang__) && !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__INTEL_LLVM_COMPILER)
#define A2SGD_HOST_CLONES [[maybe_unused]] __attribute__((target_clones("avx512f", "avx2", "default")))
#define A2SGD_HOST_CLONES_ACTIVE
#else
#define A2SGD_HOST_CLONES [[maybe_unused]]
#endif

#include <a2sgd/core/Types.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

#include <array>
#include <string>

namespace a2sgd::impl {

/// f(i) for i in [begin, end) as one SIMD loop compiled per ISA. Only for element-wise functors:
/// f(i) reads and writes entry i of its views alone (the loop is declared free of dependencies).
/// `streams`: where entry 0 of each float array that f(i) touches at entry i lies; each chunk of
/// 32 entries then prefetches them ahead (impl/Prefetch.hpp: a rank alone on the memory bus
/// needs it to stream at the bench's ceilings).
// The functor is taken by value: a local copy's fields (scalars, view pointers) cannot alias the
// stores, so the compiler may keep them in registers.
template <class Functor, std::size_t Streams = 0>
A2SGD_HOST_CLONES void simd_block(const Functor f, Index begin, Index end,
                                  const std::array<const float*, Streams>& streams = {}) {
  Index i = begin;
  if constexpr (Streams > 0) {
    for (; i + 32 <= end; i += 32) {
      for (const float* s : streams) prefetch_chunk(s + i);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
      for (Index j = i; j < i + 32; ++j) f(j);
    }
  }
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (Index j = i; j < end; ++j) f(j);
}

/// An element-wise Kokkos parallel_for over [begin, end): on a host backend one work item is a
/// block of 4096 entries run by simd_block (so AVX2/AVX-512 clones apply to code that the baseline
/// build compiles for SSE2 only), with `streams` prefetched; on a device one work item per entry.
template <class Functor, std::size_t Streams = 0>
void simd_parallel_for(const std::string& label, const ExecutionSpace& exec, Index begin, Index end, const Functor& f,
                       const std::array<const float*, Streams>& streams = {}) {
  if constexpr (host_backend) {
    constexpr Index block = 4096;
    Kokkos::parallel_for(label, Policy(exec, 0, (end - begin + block - 1) / block), [=](Index b) {
      const Index first = begin + b * block;
      simd_block(f, first, first + block < end ? first + block : end, streams);
    });
  } else {
    Kokkos::parallel_for(label, Policy(exec, begin, end), f);
  }
}

}  // namespace a2sgd::impl
