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
/// exp(x) in float with at most 1 ulp of error (the polynomial is evaluated in double, then
/// rounded once), written without calls or branches so that a loop of it vectorises: softmax over a
/// 10,000-word vocabulary is dominated by exp. Overflow gives +Inf, underflow subnormals and 0,
/// NaN stays NaN.
KOKKOS_INLINE_FUNCTION float exp_vectorizable(float x) {
  // Clamped so that the exponent arithmetic below stays in range (float's exp is 0 below -104 and
  // Inf above 89 either way); NaN passes the comparisons unchanged.
  double xd = x < -200.0f ? -200.0 : (x > 200.0f ? 200.0 : static_cast<double>(x));
  constexpr double log2e = 1.4426950408889634, ln2 = 0.6931471805599453, magic = 6755399441055744.0;  // 1.5 2^52
  const double t = xd * log2e + magic;  // k = round(x log2(e)) in t's low bits
  const double k = t - magic;
  const double r = xd - k * ln2;  // |r| <= ln2 / 2
  // Taylor to degree 7: truncation below 6e-9 relative, 0.1 float ulp.
  double p = 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  union {
    double d;
    std::int64_t i;
  } tb{t}, mb{magic}, scale{0.0};
  scale.i = (tb.i - mb.i + 1023) << 52;  // 2^k
  return static_cast<float>(p * scale.d);
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
