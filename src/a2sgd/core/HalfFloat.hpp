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

/// float -> fp16 (RNE; overflow to +-Inf, gradual underflow, NaN kept).
KOKKOS_INLINE_FUNCTION std::uint16_t to_fp16(float f) {
  const std::uint32_t x = detail::float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536: Inf
  const int exp = static_cast<int>(abs >> 23) - 127 + 15;
  std::uint32_t mant = abs & 0x7fffffu;
  if (exp <= 0) {  // fp16 subnormal or zero
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may round up to Inf: correct
  return static_cast<std::uint16_t>(sign | h);
}

KOKKOS_INLINE_FUNCTION float from_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return detail::bits_float(sign | 0x7f800000u | (mant << 13));
  return detail::bits_float(sign | ((exp - 15u + 127u) << 23) | (mant << 13));
}

/// float -> bfloat16 (RNE, NaN kept).
KOKKOS_INLINE_FUNCTION std::uint16_t to_bf16(float f) {
  const std::uint32_t x = detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

KOKKOS_INLINE_FUNCTION float from_bf16(std::uint16_t h) {
  return detail::bits_float(static_cast<std::uint32_t>(h) << 16);
}

}  // namespace a2sgd
