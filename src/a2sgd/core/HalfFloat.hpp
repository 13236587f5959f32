#pragma once
/// @file HalfFloat.hpp
/// IEEE binary16 (fp16) and bfloat16 conversions with round-to-nearest-even, callable in
/// kernels (no hardware half type needed).

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace a2sgd {

namespace detail {
KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float f) {
  union {
    float f;
    std::uint32_t u;
  } v{f};
  return v.u;
}
KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
  union {
    std::uint32_t u;
    float f;
  } v{u};
  return v.f;
}
}  // namespace detail

/// float -> fp16 bits (RNE; overflow to +-Inf, gradual underflow, NaN kept as a quiet NaN).
///
/// Branch-free, so that a loop of conversions vectorises (every case is computed and the right one
/// selected): the normal range rebiases the exponent and rounds the 13 dropped mantissa bits to
/// nearest even by one integer addition (a carry into the exponent is the correct rounding, up to
/// Inf); the subnormal range lets a float addition do the rounding, aligning the value's bits
/// against 0.5f so that the float's mantissa holds the fp16 bits (exact under round-to-nearest,
/// the IEEE default; no fast-math reassociation applies, since the result is read as bits).
KOKKOS_INLINE_FUNCTION std::uint32_t to_fp16_bits(float f) {
  const std::uint32_t x = detail::float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  // abs >= 2^-14: exponent - 112, plus 0xfff and the kept mantissa's lowest bit (ties to even).
  const std::uint32_t normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;
  // abs < 2^-14: abs + 0.5 keeps abs / 2^-24 rounded to an integer in the low mantissa bits.
  const std::uint32_t subnormal = detail::float_bits(detail::bits_float(abs) + 0.5f) - 0x3f000000u;
  // Compared as signed integers (abs < 2^31), which every SIMD ISA compares in one instruction.
  const auto a = static_cast<std::int32_t>(abs);
  const std::uint32_t inf_nan = 0x7c00u | (static_cast<std::uint32_t>(a > 0x7f800000) << 9);  // NaN: 0x7e00
  std::uint32_t h = a < 0x38800000 ? subnormal : normal;
  h = a >= 0x47800000 ? inf_nan : h;  // >= 65536 rounds to Inf
  return sign | h;
}

/// float -> fp16 (see to_fp16_bits, which returns the same 16 bits in a 32-bit integer: a loop
/// that keeps its lanes 32 bits wide until the store vectorises on AVX-512F's 16 x 32-bit lanes).
KOKKOS_INLINE_FUNCTION std::uint16_t to_fp16(float f) {
  return static_cast<std::uint16_t>(to_fp16_bits(f));
}

/// fp16 bits (the low 16 bits of h) -> float (exact). Branch-free like to_fp16_bits, and 32 bits
/// wide for the same reason.
KOKKOS_INLINE_FUNCTION float from_fp16_bits(std::uint32_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t bits = static_cast<std::uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa in place
  const std::uint32_t exp = bits & 0x0f800000u;
  const std::uint32_t normal = bits + 0x38000000u;   // exponent + 112
  const std::uint32_t special = bits + 0x70000000u;  // exponent 31 -> 255: Inf and NaN (payload kept)
  // Subnormals and zero: 2^-14 * (1 + mant / 1024) - 2^-14 = mant * 2^-24, exactly.
  const std::uint32_t subnormal = detail::float_bits(detail::bits_float(bits + 0x38800000u) - 6.103515625e-05f);
  const std::uint32_t u = exp == 0x0f800000u ? special : (exp == 0u ? subnormal : normal);
  return detail::bits_float(sign | u);
}

/// fp16 -> float (exact).
KOKKOS_INLINE_FUNCTION float from_fp16(std::uint16_t h) {
  return from_fp16_bits(h);
}

/// float -> bfloat16 (RNE, NaN kept as a quiet NaN). Branch-free like to_fp16.
KOKKOS_INLINE_FUNCTION std::uint16_t to_bf16(float f) {
  const std::uint32_t x = detail::float_bits(f);
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : rounded);
}

KOKKOS_INLINE_FUNCTION float from_bf16(std::uint16_t h) {
  return detail::bits_float(static_cast<std::uint32_t>(h) << 16);
}

}  // namespace a2sgd
