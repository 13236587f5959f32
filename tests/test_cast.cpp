#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

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
