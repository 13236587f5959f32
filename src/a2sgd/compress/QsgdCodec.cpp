#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/QsgdKernels.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Norms.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

// The AVX-512 kernels: x86-64 host builds with GCC or Clang (function-level target attributes),
// unless per-ISA host code is switched off (A2SGD_ENABLE_HOST_CLONES=OFF, the portability run).
#if defined(A2SGD_HOST_CLONES_ENABLED) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__INTEL_LLVM_COMPILER)
#define A2SGD_QSGD_AVX512
// GCC 12's intrinsics header starts several intrinsics from a deliberately undefined vector
// (_mm512_undefined_epi32), which -Wmaybe-uninitialized reports once inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace a2sgd {
namespace {
using Words = Kokkos::View<std::uint32_t*, MemorySpace>;

// Field of entry i: sign in the top bit, level in the others; x = s |g_i| / v is rounded up with
// probability x - floor(x), so E[l_i] = x. Branch-free: the rounding and the signs are random,
// branches would be mispredicted.
struct QsgdField {
  float to_level;     // s / v
  std::uint32_t top;  // s
  int bits;
  std::uint64_t key;  // (seed, step, rank)

  KOKKOS_INLINE_FUNCTION std::uint32_t operator()(float a, Index i) const {
    const float x = a2sgd::detail::abs(a) * to_level;
    const auto lo = static_cast<std::uint32_t>(static_cast<std::int32_t>(x));  // floor: 0 <= x <= s < 2^24
    std::uint32_t level =
        lo + static_cast<std::uint32_t>(compress::impl::counter_uniform(key, static_cast<std::uint64_t>(i)) <
                                        x - static_cast<float>(lo));
    level = level < top ? level : top;
    return level | (static_cast<std::uint32_t>(a < 0.0f) << (bits - 1));
  }
};

// The step's field rule from the squared norm on the device: v = ||g||, s / v (0 for a zero
// gradient); a non-finite gradient makes v NaN (no level is computed, the NaN norm reaches every
// rank, which then stops).
struct QsgdNorm {
  Kokkos::View<const double, MemorySpace> sum_sq;
  QsgdField rule;  // to_level filled in by field()
  KOKKOS_INLINE_FUNCTION bool finite() const { return sum_sq() - sum_sq() == 0.0; }
  KOKKOS_INLINE_FUNCTION float norm() const {
    return finite() ? static_cast<float>(a2sgd::detail::sqrt(sum_sq())) : a2sgd::detail::quiet_nan();
  }
  KOKKOS_INLINE_FUNCTION QsgdField field() const {
    QsgdField f = rule;
    const float v = norm();
    f.to_level = finite() && v > 0.0f ? static_cast<float>(rule.top) / v : 0.0f;
    return f;
  }
};

// sign v l of one field (before the 1 / (s p) every decoded value shares).
KOKKOS_INLINE_FUNCTION float decode_field(std::uint32_t f, float v, int bits) {
  const std::uint32_t level_mask = (std::uint32_t(1) << (bits - 1)) - 1u;
  const float sign = 1.0f - 2.0f * static_cast<float>(f >> (bits - 1));
  return sign * v * static_cast<float>(f & level_mask);
}

// Host kernels, one call per block of groups (a per-ISA call per 32 entries cost more than the
// work), templated on the field width B so that packing and unpacking unroll into constant shifts:
// with B known only at run time the bit loops were scalar and branching.
// Widths 2 .. 25 (qsgd_bits()).
constexpr int min_bits = 2, max_bits = 25;

// The fields of `groups` whole groups from g[0], entry index `begin` onwards, packed into out[0..).
template <int B>
A2SGD_HOST_CLONES void qsgd_pack_block(const float* g, Index begin, Index groups, QsgdField field, std::uint32_t* out) {
  for (Index grp = 0; grp < groups; ++grp) {
    std::uint32_t f[32];
    const float* gg = g + 32 * grp;
    impl::prefetch_chunk(gg);
    const Index first = begin + 32 * grp;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < 32; ++j) f[j] = field(gg[j], first + j);
    std::uint32_t* o = out + B * grp;
    impl::prefetch_chunk<true>(o);
    std::uint64_t acc = 0;
    int filled = 0;
#pragma GCC unroll 32
    for (int j = 0; j < 32; ++j) {
      acc |= static_cast<std::uint64_t>(f[j]) << filled;
      filled += B;
      if (filled >= 32) {
        *o++ = static_cast<std::uint32_t>(acc);
        acc >>= 32;
        filled -= 32;
      }
    }
  }
}

// u[32 grp + j] = unit sum_r sign v_r l for the whole groups [g0, g0 + groups) of every rank's
// payload (`stride` words each: the norm, then the fields). A field is read as 8 bytes from its
// first byte (the words are a little-endian bit stream), so a group's last fields read up to 7
// bytes into the next group: the caller leaves the stream's last group to the generic path.
template <int B>
A2SGD_HOST_CLONES void qsgd_decode_block(const std::uint32_t* all, Index stride, int p, Index g0, Index groups,
                                         float unit, float* u) {
  constexpr std::uint64_t mask = (std::uint64_t(1) << B) - 1u;
  for (Index grp = g0; grp < g0 + groups; ++grp) {
    impl::prefetch_chunk<true>(u + 32 * grp);
    float sum[32] = {};
    for (int r = 0; r < p; ++r) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(all + r * stride + 1 + B * grp);
      impl::prefetch_chunk(bytes);
      const float v = detail::bits_float(all[r * stride]);
      std::uint32_t f[32];
#pragma GCC unroll 32
      for (int j = 0; j < 32; ++j) {
        std::uint64_t two;
        std::memcpy(&two, bytes + (j * B) / 8, sizeof two);
        f[j] = static_cast<std::uint32_t>((two >> ((j * B) % 8)) & mask);
      }
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
      for (int j = 0; j < 32; ++j) sum[j] += decode_field(f[j], v, B);
    }
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < 32; ++j) u[32 * grp + j] = sum[j] * unit;
  }
}

std::atomic<bool> generic_forced{false};

bool qsgd_generic_kernels_forced() noexcept {
  return generic_forced.load(std::memory_order_relaxed);
}

#ifdef A2SGD_QSGD_AVX512
// AVX-512 kernels for fields of up to 16 bits (the generic ones above are bound by moving fields
// between vector lanes and scalar shifts). A group of 32 fields is
// built in registers by pairs and quads: the fields of the even and of the odd entries are computed
// as two vectors, so that pair m (entries 2m, 2m + 1; 2B <= 32 bits) is one shift and OR per
// 32-bit lane; two pairs make a quad in a 64-bit lane (4B <= 64 bits, at stream bit 4Bm for quad
// m); each output 64-bit word is then the OR of the quads that start in it, shifted to their
// offsets, and the spill of the quad before it (lane permutes with constant indices). Unpacking
// runs the steps backwards (pairs there in 64-bit lanes). The same payload as the generic kernels,
// and the same sums up to the contraction of the decode's multiply-add (tests/test_quantization.cpp).
struct QuadLayout {
  __m512i offset;       // o_m = 4Bm mod 64 per quad
  __m512i spill_shift;  // 64 - o_m (64: no spill)
  __m512i word;         // w_m = 4Bm / 64 per quad
  __m512i next_word;    // w_m + 1
  __mmask8 straddles;   // quads that spill into the next word
  int slots;            // the most quads that start in one word
  __m512i start_index[8];
  __mmask8 start_mask[8];
  __m512i spill_index;  // for word w: the last quad starting in word w - 1
  __mmask8 spill_mask;
};

[[maybe_unused]] __attribute__((target("avx512f"))) QuadLayout quad_layout(int b) {
  alignas(64) std::int64_t offset[8], spill[8], word[8], next[8], start[8][8], spill_index[8];
  QuadLayout l;
  l.straddles = 0;
  l.slots = 0;
  l.spill_mask = 0;
  int count[8] = {};
  for (int w = 0; w < 8; ++w) {
    spill_index[w] = 0;
    for (int t = 0; t < 8; ++t) start[t][w] = 0;
  }
  for (int m = 0; m < 8; ++m) {
    const int bit = 4 * b * m;
    offset[m] = bit % 64;
    spill[m] = 64 - bit % 64;
    word[m] = bit / 64;
    next[m] = bit / 64 + 1 < 8 ? bit / 64 + 1 : 0;
    if (bit % 64 + 4 * b > 64) l.straddles = static_cast<__mmask8>(l.straddles | (1u << m));
    const int w = bit / 64;
    start[count[w]][w] = m;
    ++count[w];
  }
  for (int w = 0; w < 8; ++w) l.slots = count[w] > l.slots ? count[w] : l.slots;
  for (int t = 0; t < 8; ++t) {
    l.start_mask[t] = 0;
    for (int w = 0; w < 8; ++w)
      if (t < count[w]) l.start_mask[t] = static_cast<__mmask8>(l.start_mask[t] | (1u << w));
    l.start_index[t] = _mm512_load_si512(start[t]);
  }
  for (int w = 1; w < 8; ++w)
    for (int m = 7; m >= 0; --m)
      if ((4 * b * m) / 64 == w - 1) {
        if ((l.straddles >> m) & 1u) {
          spill_index[w] = m;
          l.spill_mask = static_cast<__mmask8>(l.spill_mask | (1u << w));
        }
        break;
      }
  l.offset = _mm512_load_si512(offset);
  l.spill_shift = _mm512_load_si512(spill);
  l.word = _mm512_load_si512(word);
  l.next_word = _mm512_load_si512(next);
  l.spill_index = _mm512_load_si512(spill_index);
  return l;
}

[[maybe_unused]] __attribute__((target("avx512f"))) inline __m512i mix32_avx512(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// QsgdField::operator() for 16 entries a with indices whose low 32 bits are `low` and whose high
// 32 bits are `high` for all 16.
[[maybe_unused]] __attribute__((target("avx512f"))) inline __m512i fields_of(__m512 a, __m512i low, std::uint32_t high,
                                                                             const QsgdField& field) {
  const __m512 x =
      _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff))),
                    _mm512_set1_ps(field.to_level));
  const __m512i lo = _mm512_cvttps_epi32(x);
  const __m512 frac = _mm512_sub_ps(x, _mm512_cvtepi32_ps(lo));
  const auto key_lo = static_cast<std::uint32_t>(field.key), key_hi = static_cast<std::uint32_t>(field.key >> 32);
  const __m512i h1 = mix32_avx512(_mm512_xor_si512(low, _mm512_set1_epi32(static_cast<int>(key_lo))));
  const __m512i h2 = mix32_avx512(_mm512_xor_si512(h1, _mm512_set1_epi32(static_cast<int>(high ^ key_hi))));
  const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h2, 8)), _mm512_set1_ps(0x1.0p-24f));
  const __mmask16 up = _mm512_cmp_ps_mask(u, frac, _CMP_LT_OQ);
  __m512i level = _mm512_mask_add_epi32(lo, up, lo, _mm512_set1_epi32(1));
  level = _mm512_min_epu32(level, _mm512_set1_epi32(static_cast<int>(field.top)));
  const __mmask16 negative = _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_or_epi32(level, negative, level, _mm512_set1_epi32(static_cast<int>(1u << (field.bits - 1))));
}

// The fields of 16 consecutive entries from `index` (whose high 32 bits are the same for all 16).
[[maybe_unused]] __attribute__((target("avx512f"))) inline __m512i fields_avx512(const float* g, std::uint64_t index,
                                                                                 const QsgdField& field) {
  const __m512i low = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(index))),
                                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return fields_of(_mm512_loadu_ps(g), low, static_cast<std::uint32_t>(index >> 32), field);
}

template <int B>
[[maybe_unused]] __attribute__((target("avx512f"))) void qsgd_pack_block_avx512(const float* g, Index begin,
                                                                                Index groups, QsgdField field,
                                                                                std::uint32_t* out) {
  static_assert(B >= 2 && B <= 16, "quads of 4B bits fit a 64-bit lane");
  const QuadLayout l = quad_layout(B);
  const __m512i low32 = _mm512_set1_epi64(0xffffffffll);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const auto store_mask = static_cast<__mmask16>((1u << B) - 1u);
  for (Index grp = 0; grp < groups; ++grp) {
    const Index first = begin + 32 * grp;
    const auto base = static_cast<std::uint32_t>(first);
    const auto high = static_cast<std::uint32_t>(static_cast<std::uint64_t>(first) >> 32);
    impl::prefetch_chunk(g + 32 * grp);
    impl::prefetch_chunk<true>(out + B * grp);  // for the masked store, as the decode's loads
    // The even and the odd entries of the group: pair m (entries 2m, 2m + 1) is then one OR away.
    const __m512 g0 = _mm512_loadu_ps(g + 32 * grp), g1 = _mm512_loadu_ps(g + 32 * grp + 16);
    const __m512i f_even = fields_of(_mm512_permutex2var_ps(g0, even, g1),
                                     _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base)), even), high, field);
    const __m512i f_odd = fields_of(_mm512_permutex2var_ps(g0, odd, g1),
                                    _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base)), odd), high, field);
    const __m512i pairs = _mm512_or_si512(f_even, _mm512_slli_epi32(f_odd, B));  // 2B <= 32 bits per lane
    // quads: pairs 2m, 2m + 1 in 64-bit lane m
    const __m512i q = _mm512_ternarylogic_epi64(pairs, low32, _mm512_slli_epi64(_mm512_srli_epi64(pairs, 32), 2 * B),
                                                0xEA);  // (A & B) | C
    const __m512i placed = _mm512_sllv_epi64(q, l.offset);
    const __m512i spilled = _mm512_srlv_epi64(q, l.spill_shift);  // 0 where nothing spills (shift 64)
    __m512i words = _mm512_maskz_permutexvar_epi64(l.spill_mask, l.spill_index, spilled);
    for (int t = 0; t < l.slots; ++t)
      words = _mm512_or_si512(words, _mm512_maskz_permutexvar_epi64(l.start_mask[t], l.start_index[t], placed));
    _mm512_mask_storeu_epi32(out + B * grp, store_mask, words);
  }
}

template <int B>
[[maybe_unused]] __attribute__((target("avx512f"))) void qsgd_decode_block_avx512(const std::uint32_t* all,
                                                                                  Index stride, int p, Index g0,
                                                                                  Index groups, float unit, float* u) {
  static_assert(B >= 2 && B <= 16, "quads of 4B bits fit a 64-bit lane");
  const QuadLayout l = quad_layout(B);
  const __m512i quad_mask = _mm512_set1_epi64(B == 16 ? -1ll : static_cast<long long>((1ull << (4 * B)) - 1u));
  const __m512i pair_mask = _mm512_set1_epi64(static_cast<long long>((1ull << (2 * B)) - 1u));
  const __m512i field_mask = _mm512_set1_epi64(static_cast<long long>((1ull << B) - 1u));
  const __m512i level_mask = _mm512_set1_epi32(static_cast<int>((1u << (B - 1)) - 1u));
  const __m512i low_pairs = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                high_pairs = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  const auto load_mask = static_cast<__mmask16>((1u << B) - 1u);
  for (Index grp = g0; grp < g0 + groups; ++grp) {
    impl::prefetch_chunk<true>(u + 32 * grp);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    for (int r = 0; r < p; ++r) {
      const std::uint32_t* payload = all + r * stride;
      impl::prefetch_chunk(payload + 1 + B * grp);  // the masked loads ran 2x slower without
      const __m512i words = _mm512_maskz_loadu_epi32(load_mask, payload + 1 + B * grp);
      const __m512i lo = _mm512_srlv_epi64(_mm512_permutexvar_epi64(l.word, words), l.offset);
      const __m512i hi =
          _mm512_sllv_epi64(_mm512_maskz_permutexvar_epi64(l.straddles, l.next_word, words), l.spill_shift);
      const __m512i q = _mm512_and_si512(_mm512_or_si512(lo, hi), quad_mask);
      const __m512i e = _mm512_and_si512(q, pair_mask), o = _mm512_srli_epi64(q, 2 * B);
      const __m512i pa = _mm512_permutex2var_epi64(e, low_pairs, o), pb = _mm512_permutex2var_epi64(e, high_pairs, o);
      const __m512i f0 =
          _mm512_or_si512(_mm512_and_si512(pa, field_mask), _mm512_slli_epi64(_mm512_srli_epi64(pa, B), 32));
      const __m512i f1 =
          _mm512_or_si512(_mm512_and_si512(pb, field_mask), _mm512_slli_epi64(_mm512_srli_epi64(pb, B), 32));
      const __m512i v = _mm512_set1_epi32(static_cast<int>(payload[0]));
      // sign v (the sign bit moved to the float's) times the level, added with one rounding, as
      // the generic kernels' contracted sum[j] += sign v l
      const __m512 sv0 = _mm512_castsi512_ps(_mm512_xor_si512(v, _mm512_slli_epi32(_mm512_srli_epi32(f0, B - 1), 31)));
      const __m512 sv1 = _mm512_castsi512_ps(_mm512_xor_si512(v, _mm512_slli_epi32(_mm512_srli_epi32(f1, B - 1), 31)));
      sum0 = _mm512_fmadd_ps(sv0, _mm512_cvtepi32_ps(_mm512_and_si512(f0, level_mask)), sum0);
      sum1 = _mm512_fmadd_ps(sv1, _mm512_cvtepi32_ps(_mm512_and_si512(f1, level_mask)), sum1);
    }
    _mm512_storeu_ps(u + 32 * grp, _mm512_mul_ps(sum0, _mm512_set1_ps(unit)));
    _mm512_storeu_ps(u + 32 * grp + 16, _mm512_mul_ps(sum1, _mm512_set1_ps(unit)));
  }
}

bool qsgd_avx512_available() noexcept {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}
#endif

// The fields alone, XOR-folded (qsgd_round_only()).
A2SGD_HOST_CLONES std::uint32_t qsgd_round_block(const float* g, Index begin, Index count, QsgdField field) {
  std::uint32_t acc = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(^ : acc)
#endif
  for (Index j = 0; j < count; ++j) acc ^= field(g[j], begin + j);
  return acc;
}

#ifdef A2SGD_QSGD_AVX512
[[maybe_unused]] __attribute__((target("avx512f"))) std::uint32_t qsgd_round_block_avx512(const float* g, Index begin,
                                                                                          Index count,
                                                                                          QsgdField field) {
  __m512i acc = _mm512_setzero_si512();
  Index j = 0;
  for (; j + 32 <= count; j += 32) {  // as the pack kernel: 32-entry groups, indices 32-aligned
    acc = _mm512_xor_si512(acc, fields_avx512(g + j, static_cast<std::uint64_t>(begin + j), field));
    acc = _mm512_xor_si512(acc, fields_avx512(g + j + 16, static_cast<std::uint64_t>(begin + j + 16), field));
  }
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, acc);
  std::uint32_t r = 0;
  for (int l = 0; l < 16; ++l) r ^= lanes[l];
  for (; j < count; ++j) r ^= field(g[j], begin + j);
  return r;
}
#endif

// The width's instantiation of each kernel, picked once per call.
struct QsgdHostKernels {
  void (*pack)(const float*, Index, Index, QsgdField, std::uint32_t*);
  void (*decode)(const std::uint32_t*, Index, int, Index, Index, float, float*);
};

template <int B>
QsgdHostKernels qsgd_host_kernels_from(int bits) {
  if constexpr (B > max_bits) {
    throw InvalidArgument("qsgd: " + std::to_string(bits) + "-bit fields");
  } else {
    if (bits == B) {
#ifdef A2SGD_QSGD_AVX512
      if constexpr (B <= 16)
        if (qsgd_avx512_available() && !qsgd_generic_kernels_forced())
          return {&qsgd_pack_block_avx512<B>, &qsgd_decode_block_avx512<B>};
#endif
      return {&qsgd_pack_block<B>, &qsgd_decode_block<B>};
    }
    return qsgd_host_kernels_from<B + 1>(bits);
  }
}

QsgdHostKernels qsgd_host_kernels(int bits) {
  return qsgd_host_kernels_from<min_bits>(bits);
}

// Groups per host work item.
constexpr Index host_block_groups = 128;

// out(0) = v, then the fields in groups of 32 (impl/BitPack.hpp).
template <class Exec>
void pack_payload(const Exec& exec, const Words& out, const ConstFloatView& g, const QsgdNorm& rule, Index n) {
  const Index groups = compress::impl::packed_groups(n);
  const int bits = rule.rule.bits;
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    exec.fence();  // host backends: the norm is read once, for free
    const bool finite = rule.finite();
    const QsgdField field = rule.field();
    out(0) = detail::float_bits(rule.norm());
    // Whole groups in blocks; a last partial group by the generic packer. A non-finite gradient
    // packs zero fields (the NaN norm stops every rank).
    if (!finite) {
      Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::qsgd_pack"),
                           Policy(exec, 1, 1 + compress::impl::packed_words(n, bits)), [=](Index w) { out(w) = 0; });
      return;
    }
    const Index whole = n / 32;
    const auto pack = qsgd_host_kernels(bits).pack;
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::qsgd_pack"),
                         Policy(exec, 0, (whole + host_block_groups - 1) / host_block_groups), [=](Index b) {
                           const Index grp = b * host_block_groups;
                           pack(g.data() + 32 * grp, 32 * grp,
                                grp + host_block_groups < whole ? host_block_groups : whole - grp, field,
                                out.data() + 1 + bits * grp);
                         });
    if (whole < groups) compress::impl::pack_group(out, 1, whole, n, bits, [&](Index i) { return field(g(i), i); });
  } else {
    // A vector of 32 lanes per group: lane j reads entry 32 grp + j (coalesced); each of the
    // group's `bits` words is the OR of the (at most 32 / bits + 1) fields that overlap it.
    using Team = Kokkos::TeamPolicy<Exec>;
    constexpr int groups_per_team = 8;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::qsgd_pack"),
        Team(exec, static_cast<int>((groups + groups_per_team - 1) / groups_per_team), groups_per_team, 32),
        KOKKOS_LAMBDA(const typename Team::member_type& team) {
          const bool finite = rule.finite();
          const QsgdField field = rule.field();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, groups_per_team), [&](int t) {
            const Index grp = static_cast<Index>(team.league_rank()) * groups_per_team + t;
            if (grp >= groups) return;
            const int count = compress::impl::group_size(grp, n);
            const int used = (count * bits + 31) / 32;  // words of this group
            for (int w = 0; w < used; ++w) {
              std::uint32_t word = 0;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(team, count),
                  [&](int j, std::uint32_t& acc) {
                    const int offset = j * bits - 32 * w;  // the field's first bit relative to word w
                    if (finite && offset < 32 && offset + bits > 0) {
                      const std::uint32_t f = field(g(grp * 32 + j), grp * 32 + j);
                      acc |= offset >= 0 ? f << offset : f >> -offset;
                    }
                  },
                  Kokkos::BOr<std::uint32_t>(word));
              Kokkos::single(Kokkos::PerThread(team), [&]() { out(1 + grp * bits + w) = word; });
            }
            if (grp == 0) Kokkos::single(Kokkos::PerThread(team), [&]() { out(0) = detail::float_bits(rule.norm()); });
          });
        });
  }
}

// u = (1/p) sum_r sign v_r l / s over every rank's payload (`stride` words each). Host: one work
// item per group of 32 fields. Device: one thread per entry, reading the one or two words its
// field lies in (neighbouring threads read neighbouring words).
template <class Exec>
void decode_payload(const Exec& exec, const Words& all, const FloatView& u, Index n, int bits, int p, Index stride,
                    float unit) {
  const Index groups = compress::impl::packed_groups(n);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    // Every group but the stream's last in blocks (the fast kernel reads past a group's end); the
    // last by the generic unpacker.
    const Index fast = groups - 1;
    const auto decode = qsgd_host_kernels(bits).decode;
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::qsgd_decode"),
                         Policy(exec, 0, (fast + host_block_groups - 1) / host_block_groups), [=](Index b) {
                           const Index grp = b * host_block_groups;
                           decode(all.data(), stride, p, grp,
                                  grp + host_block_groups < fast ? host_block_groups : fast - grp, unit, u.data());
                         });
    float sum[32] = {};
    std::uint32_t fields[32];
    const int count = compress::impl::group_size(fast, n);
    for (int r = 0; r < p; ++r) {
      compress::impl::unpack_group(all, r * stride + 1, fast, n, bits, [&](int j, std::uint32_t f) { fields[j] = f; });
      const float v = detail::bits_float(all(r * stride));
      for (int j = 0; j < count; ++j) sum[j] += decode_field(fields[j], v, bits);
    }
    compress::impl::store_group(u, fast, n, sum, unit);
  } else {
    const std::uint64_t mask = compress::impl::field_mask(bits);
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::qsgd_decode"), Policy(exec, 0, n), KOKKOS_LAMBDA(Index i) {
          const Index grp = i / 32;
          const int bit = static_cast<int>(i % 32) * bits;  // within the group's words
          float sum = 0.0f;
          for (int r = 0; r < p; ++r) {
            const Index w = r * stride + 1 + grp * bits + bit / 32;
            std::uint64_t acc = all(w);
            if ((bit % 32) + bits > 32) acc |= static_cast<std::uint64_t>(all(w + 1)) << 32;
            const auto f = static_cast<std::uint32_t>((acc >> (bit % 32)) & mask);
            sum += decode_field(f, detail::bits_float(all(r * stride)), bits);
          }
          u(i) = sum * unit;
        });
  }
}

}  // namespace

int qsgd_bits(std::int64_t levels) {
  if (levels < 1 || levels >= (std::int64_t(1) << 24))
    throw InvalidArgument("qsgd: " + std::to_string(levels) + " levels is not in [1, 16777215]");
  int bits = 0;
  while ((std::int64_t(1) << bits) < levels + 1) ++bits;
  return bits + 1;
}

QsgdCodec::QsgdCodec(Index n, std::int64_t levels)
    : m_n(n), m_levels(levels), m_bits(qsgd_bits(levels)), m_sum_sq("a2sgd::compress::qsgd_sum_sq") {
  if (n < 1) throw InvalidArgument("qsgd: an empty buffer");
}

Index QsgdCodec::payload_words() const noexcept {
  return 1 + compress::impl::packed_words(m_n, m_bits);
}

std::uint64_t QsgdCodec::rounding_key(std::uint64_t seed, std::uint64_t step, int rank) noexcept {
  return derive_seed(derive_seed(seed, step), static_cast<std::uint64_t>(rank));
}

void QsgdCodec::encode(const ExecutionSpace& exec, const ConstFloatView& g, std::uint64_t key,
                       const Words& payload) const {
  detail::squared_norm(exec, g, m_sum_sq);
  const QsgdField field{0.0f, static_cast<std::uint32_t>(m_levels), m_bits, key};
  pack_payload(exec, payload, g, QsgdNorm{m_sum_sq, field}, m_n);
}

void QsgdCodec::decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const {
  const float s = static_cast<float>(m_levels);
  decode_payload(exec, gathered, u, m_n, m_bits, p, payload_words(), 1.0f / (s * static_cast<float>(p)));
}

namespace compress::impl {

bool qsgd_avx512_kernels() noexcept {
#ifdef A2SGD_QSGD_AVX512
  return qsgd_avx512_available() && !qsgd_generic_kernels_forced();
#else
  return false;
#endif
}

void force_qsgd_generic_kernels(bool force) noexcept {
  generic_forced.store(force, std::memory_order_relaxed);
}

std::uint32_t qsgd_round_only(const float* g, std::int64_t n, std::int64_t first, std::uint64_t key, float v,
                              std::int64_t levels) {
  const int bits = qsgd_bits(levels);
  const QsgdField field{v > 0.0f ? static_cast<float>(levels) / v : 0.0f, static_cast<std::uint32_t>(levels), bits,
                        key};
#ifdef A2SGD_QSGD_AVX512
  if (bits <= 16 && qsgd_avx512_kernels()) return qsgd_round_block_avx512(g, first, n, field);
#endif
  return qsgd_round_block(g, first, n, field);
}

void qsgd_pack_only(const float* g, std::int64_t groups, std::int64_t first, std::uint64_t key, float v,
                    std::int64_t levels, std::uint32_t* out) {
  const int bits = qsgd_bits(levels);
  const QsgdField field{v > 0.0f ? static_cast<float>(levels) / v : 0.0f, static_cast<std::uint32_t>(levels), bits,
                        key};
  qsgd_host_kernels(bits).pack(g, first, groups, field, out);
}

void qsgd_decode_only(const std::uint32_t* all, std::int64_t stride, int p, std::int64_t groups, std::int64_t levels,
                      float* u) {
  const int bits = qsgd_bits(levels);
  if (stride < 1 + bits * groups + 2)
    throw InvalidArgument("qsgd_decode_only: a stride of " + std::to_string(stride) + " words for " +
                          std::to_string(groups) + " groups of " + std::to_string(bits) + "-bit fields");
  qsgd_host_kernels(bits).decode(all, stride, p, 0, groups, 1.0f / (static_cast<float>(levels) * p), u);
}

}  // namespace compress::impl

}  // namespace a2sgd
