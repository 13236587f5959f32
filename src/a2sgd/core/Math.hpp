#pragma once
/// @file Math.hpp
/// Device-callable math that spells the same on Kokkos 3.4 and 4.x.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace a2sgd::detail {

KOKKOS_INLINE_FUNCTION float sqrt(float x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}

KOKKOS_INLINE_FUNCTION double sqrt(double x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}

KOKKOS_INLINE_FUNCTION float exp(float x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::exp(x);
#else
  return Kokkos::Experimental::exp(x);
#endif
}

KOKKOS_INLINE_FUNCTION double log(double x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::log(x);
#else
  return Kokkos::Experimental::log(x);
#endif
}

KOKKOS_INLINE_FUNCTION float tanh(float x) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::tanh(x);
#else
  return Kokkos::Experimental::tanh(x);
#endif
}
/// The logistic function 1 / (1 + exp(-x)); exp overflowing to +Inf gives exactly 0.
KOKKOS_INLINE_FUNCTION float sigmoid(float x) {
  return 1.0f / (1.0f + exp(-x));
}
/// A quiet NaN, in kernels too (no numeric_limits on every device).
KOKKOS_INLINE_FUNCTION float quiet_nan() {
  union {
    std::uint32_t u;
    float f;
  } v{0x7fc00000u};
  return v.f;
}

/// |x| by clearing the sign bit: branch-free (gradient signs are random, and a compiler may keep
/// a compare-and-negate as a mispredicted branch) and vectorisable; NaN stays NaN.
KOKKOS_INLINE_FUNCTION float abs(float x) {
  union {
    float f;
    std::uint32_t u;
  } v{x};
  v.u &= 0x7fffffffu;
  return v.f;
}

/// True for NaN and +-Inf, without isnan/isinf (x - x is 0 exactly for every finite x).
KOKKOS_INLINE_FUNCTION bool non_finite(float x) {
  return !(x - x == 0.0f);
}

}  // namespace a2sgd::detail
