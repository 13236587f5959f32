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

/// exp(x) in double with at most 6e-9 relative error, for |x| up to 200 (beyond, the argument is
/// clamped: float results are 0 or Inf there anyway), written without calls or branches so that a
/// loop of it vectorises. NaN stays NaN.
KOKKOS_INLINE_FUNCTION double exp_approx(double x) {
  // Clamped so that the exponent arithmetic below stays in range; NaN passes the comparisons.
  const double xd = x < -200.0 ? -200.0 : (x > 200.0 ? 200.0 : x);
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
    std::uint64_t u;
  } tb{t}, mb{magic}, scale{0.0};
  // 2^k. Unsigned: the same bits as signed arithmetic for every k in range, and defined (modulo
  // 2^64) for a NaN x, whose bits are arbitrary (the NaN of p then wins).
  scale.u = (tb.u - mb.u + 1023u) << 52;
  return p * scale.d;
}

/// exp(x) in float with at most 1 ulp of error (exp_approx, then rounded once), vectorisable:
/// softmax over a 10,000-word vocabulary is dominated by exp. Overflow gives +Inf, underflow
/// subnormals and 0, NaN stays NaN.
KOKKOS_INLINE_FUNCTION float exp_vectorizable(float x) {
  return static_cast<float>(exp_approx(static_cast<double>(x)));
}

/// The logistic function 1 / (1 + exp(-x)) in float, evaluated in double and rounded once (at most
/// 1 ulp), without calls or branches: the LSTM's gates vectorise. exp(-x) overflowing gives 0.
KOKKOS_INLINE_FUNCTION float sigmoid(float x) {
  return static_cast<float>(1.0 / (1.0 + exp_approx(-static_cast<double>(x))));
}

/// tanh(x) in float, evaluated in double and rounded once (at most 1 ulp), without calls or
/// branches. Below |x| = 0.3 the odd Taylor series to x^13 (truncation 1e-10 relative); above it
/// 1 - 2 / (exp(2|x|) + 1), whose subtraction loses at most a factor 2.5 of exp_approx's 6e-9.
/// Saturates to +-1 (|x| is clamped at 20, where tanh rounds to 1 in float); NaN stays NaN.
KOKKOS_INLINE_FUNCTION float tanh(float x) {
  const double xd = static_cast<double>(x);
  const double a0 = xd < 0.0 ? -xd : xd;
  const double a = a0 > 20.0 ? 20.0 : a0;
  const double s = a * a;
  double p = 21844.0 / 6081075.0;
  p = p * s - 1382.0 / 155925.0;
  p = p * s + 62.0 / 2835.0;
  p = p * s - 17.0 / 315.0;
  p = p * s + 2.0 / 15.0;
  p = p * s - 1.0 / 3.0;
  p = p * s + 1.0;
  const double small = a * p;
  const double large = 1.0 - 2.0 / (exp_approx(2.0 * a) + 1.0);
  const double t = a < 0.3 ? small : large;
  return static_cast<float>(xd < 0.0 ? -t : t);
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
