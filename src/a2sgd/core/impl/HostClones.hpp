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
