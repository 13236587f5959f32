#include "MethodTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// x after one exchange step of `method` from x = 0 with SGD at lr 1: -(fl(1/p) * the decoded sum).
std::vector<float> one_sgd_step(const char* method, const Communicator& comm, const std::vector<float>& g) {
  const auto n = static_cast<Index>(g.size());
  ExchangeConfig cfg;
  cfg.method = method;
  auto ex = make_exchange(cfg, comm, n);
  Optimizer sgd(OptimizerConfig{}, n);
  auto x = to_device(std::vector<float>(g.size(), 0.0f));
  ex->step(x, to_device(g), sgd, 1.0);
  return to_host(x);
}

// Straightforward references for the branch-free conversions: one case at a time, rounding by
// comparing the dropped bits with half an ulp.
std::uint16_t reference_to_fp16(float f) {
  const std::uint32_t x = bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536: Inf
  const int exp = static_cast<int>(abs >> 23) - 127 + 15;
  std::uint32_t mant = abs & 0x7fffffu;
  if (exp <= 0) {
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
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float reference_from_fp16(std::uint16_t h) {
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  const float magnitude = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                          : exp == 31
                              ? from_bits(0x7f800000u | (mant << 13))
                              : std::ldexp(1.0f + static_cast<float>(mant) / 1024.0f, static_cast<int>(exp) - 15);
  return (h & 0x8000u) ? -magnitude : magnitude;
}
}  // namespace

TEST_CASE("fp16 conversions equal the one-case-at-a-time reference on every input", "[half]") {
  // Every one of the 2^32 float bit patterns, and every fp16 value. The AddressSanitizer build
  // (which also checks undefined behaviour) takes every 257th pattern: 16.7 million, each of the
  // 512 sign-and-exponent combinations with about 32,000 mantissas.
  const std::uint64_t stride = address_sanitizer_build ? 257 : 1;
  std::uint64_t wrong = 0;
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += stride) {
    const float f = from_bits(static_cast<std::uint32_t>(u));
    wrong += to_fp16(f) != reference_to_fp16(f);
  }
  CHECK(wrong == 0);
  wrong = 0;
  for (std::uint32_t h = 0; h <= 0xffffu; ++h)
    wrong += bits(from_fp16(static_cast<std::uint16_t>(h))) != bits(reference_from_fp16(static_cast<std::uint16_t>(h)));
  CHECK(wrong == 0);
}

TEST_CASE("fp16 and bf16 conversions round to nearest even", "[half]") {
  // Exactly representable values survive the round trip.
  for (float v :
       {0.0f, -0.0f, 1.0f, -2.0f, 65504.0f, 6.103515625e-05f /* 2^-14 */, 5.9604644775390625e-08f /* 2^-24 */})
    CHECK(bits(from_fp16(to_fp16(v))) == bits(v));
  CHECK(from_fp16(to_fp16(1.0f + std::ldexp(1.0f, -11))) == 1.0f);                             // tie -> even
  CHECK(from_fp16(to_fp16(1.0f + 3 * std::ldexp(1.0f, -11))) == 1.0f + std::ldexp(1.0f, -9));  // tie -> even
  CHECK(from_fp16(to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20))) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(std::isinf(from_fp16(to_fp16(65520.0f))));  // halfway to 65536 rounds up to Inf
  CHECK(from_fp16(to_fp16(65519.0f)) == 65504.0f);
  CHECK(from_fp16(to_fp16(std::ldexp(1.0f, -26))) == 0.0f);                       // below half the smallest subnormal
  CHECK(from_fp16(to_fp16(3 * std::ldexp(1.0f, -25))) == std::ldexp(1.0f, -23));  // subnormal tie -> even
  CHECK(std::isnan(from_fp16(to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(from_fp16(to_fp16(-std::numeric_limits<float>::infinity())) == -std::numeric_limits<float>::infinity());
  // Against the compiler's binary16 on random values across the range (where it has one: GCC on
  // x86-64 does; Clang 14 only with AVX512-FP16).
  Rng rng(3);
  int wrong = 0;
#ifdef __FLT16_MANT_DIG__
  for (int i = 0; i < 200000; ++i) {
    const float v = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(40)) - 26));
    const auto ref = static_cast<float>(static_cast<_Float16>(v));
    wrong += bits(from_fp16(to_fp16(v))) != bits(ref);
  }
  CHECK(wrong == 0);
#endif

  CHECK(from_bf16(to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);                             // tie -> even
  CHECK(from_bf16(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));  // tie -> even
  CHECK(from_bf16(to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // Against a reference written differently: the nearer of the two neighbours, ties to even.
  wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    const float v = static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(200)) - 100));
    const std::uint32_t lo_bits = bits(v) & 0xffff0000u;
    float lo, hi;
    std::memcpy(&lo, &lo_bits, 4);
    const std::uint32_t hi_bits = lo_bits + 0x10000u;
    std::memcpy(&hi, &hi_bits, 4);
    const double dlo = std::abs(double(v) - lo), dhi = std::abs(double(hi) - v);
    const float want = dlo < dhi ? lo : (dhi < dlo ? hi : (((lo_bits >> 16) & 1u) ? hi : lo));
    wrong += bits(from_bf16(to_bf16(v))) != bits(want);
  }
  CHECK(wrong == 0);
}

TEST_CASE("casting all-reduce: the mean gradient to 16-bit precision, 2 bytes per entry", "[half]") {
  Communicator comm;
  const std::size_t n = 4099;
  for (const char* method : {"fp16", "bf16"}) {
    INFO(method);
    // Every rank rounds g to 16 bits (unit roundoff uh: 2^-11 fp16, 2^-8 bf16), the owner of each
    // chunk adds the p values in float (gamma32(p - 1)) and rounds the sum to 16 bits once more, and
    // the decoded sum is scaled by fl(1/p) in float (two roundings). Relative to sum_r |g_r|:
    // (2 uh + gamma32(p)) (1 + 2 uh); in fp16's subnormal range a rounding may instead cost up to
    // half its spacing, 2^-25, absolutely, for each of the p + 1 roundings to 16 bits.
    const bool fp16 = std::string(method) == "fp16";
    const double uh = fp16 ? 0x1p-11 : 0x1p-8, tiny = fp16 ? 0x1p-25 : 0x1p-134;
    const double p = comm.size();
    ExchangeConfig cfg;
    cfg.method = method;
    auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    Rng rng(11 + static_cast<std::uint64_t>(comm.rank()));
    std::vector<float> g(n);
    for (auto& v : g) v = static_cast<float>(rng.normal());
    const auto all = allgather(g);
    ex->step(x, to_device(g), sgd, 1.0);
    const auto xs = to_host(x);
    int off = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double mean = 0.0, scale = 0.0;
      for (int r = 0; r < comm.size(); ++r) {
        mean += all[static_cast<std::size_t>(r) * n + i] / comm.size();
        scale += std::abs(all[static_cast<std::size_t>(r) * n + i]);
      }
      off += std::abs(-xs[i] - mean) >
             ((2 * uh + gamma32(p)) * (1 + 2 * uh) * scale + (p + 1) * tiny) / p + gamma32(2) * std::abs(xs[i]);
    }
    CHECK(off == 0);
    CHECK(ex->stats().last_step.bytes_sent == 2 * n);  // 2 (n - own chunk) + 2 own chunk
    CHECK(ex->stats().last_step.messages == 2);
    // fp16 overflows above 65504: every rank stops.
    if (std::string(method) == "fp16") {
      if (comm.rank() == 0) g[3] = 1e6f;
      CHECK_THROWS_AS(ex->step(x, to_device(g), sgd, 1.0), NonFiniteError);
    }
  }
}

TEST_CASE("casting exchange: the vectorised kernels convert exactly like the scalar conversions", "[half]") {
  // One rank (MPI_COMM_SELF): x = -decode(encode(g)) exactly, with SGD at lr 1. The values cover
  // every case of the conversions (fp16 subnormals, ties, the overflow boundary, signed zeros) at
  // positions that fall into the host kernels' 512-value chunks, 4096-value blocks and tails.
  Communicator self(MPI_COMM_SELF);
  const float special[] = {0.0f,      -0.0f,     65504.0f,    65519.0f,   -65519.0f,   6.1035156e-05f,
                           6.09e-05f, 5.96e-08f, 2.98e-08f,   -2.99e-08f, 1.00048828f, 1.00146484f,
                           3.0e-39f,  -1.0e-45f, 1.0f / 3.0f, 1e-7f,      -3e-6f,      1024.5f};
  const std::size_t n = 3 * 4096 + 517;
  std::vector<float> g(n);
  Rng rng(5);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = i % 3 == 0 ? special[(i / 3) % (sizeof special / sizeof special[0])]
                      : static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(40)) - 28));
  for (const char* method : {"fp16", "bf16"}) {
    INFO(method);
    const bool fp16 = std::string(method) == "fp16";
    const auto xs = one_sgd_step(method, self, g);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float want = -(fp16 ? from_fp16(to_fp16(g[i])) : from_bf16(to_bf16(g[i])));
      wrong += bits(xs[i]) != bits(want) && !(xs[i] == 0.0f && want == 0.0f);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("casting exchange: each chunk is the float sum in rank order, rounded once, block by block", "[half]") {
  // Every rank's chunk spans two full 4096-value host blocks and a tail of a 512-value lane
  // chunk, the chunks differ in size, and rank 0 sends every special case of the conversions
  // (the others small random values, so that no sum overflows fp16). With SGD at lr 1 and p a
  // power of two, x = -(fl(1/p) * decode(encode(sum))) exactly, where the owner q of an entry
  // sums decode(encode(g_q)) and then decode(encode(g_r)) for r != q in rank order, in float.
  Communicator comm;
  const int p = comm.size();
  const float special[] = {0.0f,      -0.0f,       65504.0f,   -65519.0f,   6.1035156e-05f, 6.09e-05f,
                           5.96e-08f, 2.98e-08f,   -2.99e-08f, 1.00048828f, 1.00146484f,    3.0e-39f,
                           -1.0e-45f, 1.0f / 3.0f, 1e-7f,      -3e-6f,      1024.5f};
  const std::size_t n = static_cast<std::size_t>(p) * (2 * 4096 + 517) + static_cast<std::size_t>(p - 1);
  std::vector<float> g(n);
  Rng rng(17 + static_cast<std::uint64_t>(comm.rank()));
  for (std::size_t i = 0; i < n; ++i)
    g[i] = comm.rank() == 0 && i % 3 == 0
               ? special[(i / 3) % (sizeof special / sizeof special[0])]
               : static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(30)) - 30));
  const auto all = allgather(g);
  for (const char* method : {"fp16", "bf16"}) {
    INFO(method);
    const bool fp16 = std::string(method) == "fp16";
    const auto round_trip = [fp16](float v) { return fp16 ? from_fp16(to_fp16(v)) : from_bf16(to_bf16(v)); };
    const auto xs = one_sgd_step(method, comm, g);
    const float factor = 1.0f / static_cast<float>(p);
    std::size_t wrong = 0;
    for (int q = 0; q < p; ++q) {
      const std::size_t begin = n / p * q + std::min<std::size_t>(q, n % p);
      const std::size_t count = n / p + (static_cast<std::size_t>(q) < n % p ? 1 : 0);
      for (std::size_t i = begin; i < begin + count; ++i) {
        float sum = round_trip(all[static_cast<std::size_t>(q) * n + i]);
        for (int r = 0; r < p; ++r)
          if (r != q) sum += round_trip(all[static_cast<std::size_t>(r) * n + i]);
        const float want = -(factor * round_trip(sum));
        wrong += bits(xs[i]) != bits(want) && !(xs[i] == 0.0f && want == 0.0f);
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("fp16 and bf16 hand MPI 2 n bytes per step in two calls (docs/methods.md)", "[half][methods]") {
  const std::uint64_t n = 269322;  // the MLP
  // The 16-bit all-reduce is an all-to-all and an all-gather of the summed chunks, which the
  // projection models as a ring all-reduce.
  for (const char* method : {"fp16", "bf16"})
    check_step_plan(method, {}, {{2 * n}, CollectiveKind::allreduce, 2, AllreduceModel::ring});
}
