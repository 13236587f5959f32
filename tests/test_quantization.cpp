#include "MethodTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/RandomkExchange.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/QsgdKernels.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <limits>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

using Words = Kokkos::View<std::uint32_t*, MemorySpace>;

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

}  // namespace

TEST_CASE("bit packing round-trips fields of every width", "[bitpack]") {
  for (int bits : {1, 2, 3, 5, 7, 8, 10, 13, 16, 24, 25, 31, 32}) {
    for (Index n : {Index(1), Index(31), Index(32), Index(33), Index(1000), Index(4099)}) {
      INFO("bits " << bits << ", n " << n);
      Rng rng(static_cast<std::uint64_t>(bits * 10007 + n));
      Kokkos::View<std::uint32_t*, MemorySpace> fields("fields", static_cast<std::size_t>(n));
      auto host_fields = Kokkos::create_mirror_view(fields);
      const std::uint64_t mask = compress::impl::field_mask(bits);
      for (Index i = 0; i < n; ++i) host_fields(i) = static_cast<std::uint32_t>((rng.below(1ull << 32)) & mask);
      host_fields(0) = static_cast<std::uint32_t>(mask);      // all ones at the stream start
      host_fields(n - 1) = static_cast<std::uint32_t>(mask);  // and at its end
      Kokkos::deep_copy(fields, host_fields);
      const Index words = compress::impl::packed_words(n, bits);
      CHECK(words == (n * bits + 31) / 32);
      // Word 0 stands for another payload field, the word after the stream is a sentinel.
      Words packed("packed", static_cast<std::size_t>(words + 2));
      Kokkos::deep_copy(Kokkos::subview(packed, words + 1), 0xDEADBEEFu);
      const Index groups = compress::impl::packed_groups(n);
      CHECK(groups == (n + 31) / 32);
      Kokkos::parallel_for(
          Policy(0, groups), KOKKOS_LAMBDA(Index grp) {
            compress::impl::pack_group(packed, 1, grp, n, bits, [=](Index i) { return fields(i); });
          });
      Kokkos::View<std::uint32_t*, MemorySpace> back("back", static_cast<std::size_t>(n));
      Kokkos::parallel_for(
          Policy(0, groups), KOKKOS_LAMBDA(Index grp) {
            compress::impl::unpack_group(packed, 1, grp, n, bits,
                                         [&](int j, std::uint32_t f) { back(grp * 32 + j) = f; });
          });
      auto host_back = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), back);
      auto host_packed = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), packed);
      int wrong = 0;
      for (Index i = 0; i < n; ++i) wrong += host_back(i) != host_fields(i);
      CHECK(wrong == 0);
      // Bits past the last field stay zero, so payloads compare and hash deterministically.
      const int used = static_cast<int>((n * bits) % 32);
      if (used != 0) CHECK((host_packed(words) >> used) == 0u);
      CHECK(host_packed(0) == 0u);
      CHECK(host_packed(words + 1) == 0xDEADBEEFu);
    }
  }
}

TEST_CASE("QSGD bits per entry and bytes per step follow ceil(log2(s+1)) + 1", "[qsgd]") {
  CHECK(QsgdExchange::bits_for_levels(1) == 2);
  CHECK(QsgdExchange::bits_for_levels(3) == 3);
  CHECK(QsgdExchange::bits_for_levels(4) == 4);
  CHECK(QsgdExchange::bits_for_levels(255) == 9);
  CHECK(QsgdExchange::bits_for_levels(256) == 10);
  CHECK(QsgdExchange::bits_for_levels((1 << 24) - 1) == 25);
  CHECK_THROWS_WITH(QsgdExchange::bits_for_levels(0), A2SGD_CONTAINS("0 levels"));
  CHECK_THROWS_AS(QsgdExchange::bits_for_levels(1 << 24), InvalidArgument);

  Communicator comm;
  for (std::int64_t s : {1, 7, 256}) {
    const std::size_t n = 1001;
    QsgdOptions o;
    o.levels = s;
    QsgdExchange ex(comm, static_cast<Index>(n), o);
    const int b = QsgdExchange::bits_for_levels(s);
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    ex.step(x, to_device(random_values(n, 3)), sgd, 1.0);
    CHECK(ex.stats().last_step.bytes_sent == 4 + 4 * ((n * b + 31) / 32));
    CHECK(ex.stats().last_step.messages == 1);
  }
}

TEST_CASE(
    "QSGD's codec packs the specified fields for every width and decodes them within the rounding bound, with "
    "each host kernel",
    "[qsgd][codec]") {
  // The specification the kernels must meet (QsgdCodec.hpp): x = |g_i| fl(s / v), level = floor(x)
  // + [u_i < x - floor(x)] with u_i = counter_uniform(key, i), at most s, the sign in the top bit;
  // fields packed by pack_group. Computed here by scalar code, compared word for word: the kernels
  // (the generic ones and, where the CPU has AVX-512, the AVX-512 ones for widths up to 16) must
  // produce exactly these words.
  const ExecutionSpace exec;
  struct Forced {
    ~Forced() { compress::impl::force_qsgd_generic_kernels(false); }
  } restore;
  for (bool generic : {false, true}) {
    compress::impl::force_qsgd_generic_kernels(generic);
    INFO((generic                                 ? "generic kernels"
          : compress::impl::qsgd_avx512_kernels() ? "AVX-512 kernels"
                                                  : "generic kernels (default)"));
    // Every width: 2^(b-1) - 1 levels take b bits (b = 3 .. 25), one level 2; and a few others.
    std::vector<std::int64_t> levels = {1, 5, 100, 256, 1000};
    for (int b = 3; b <= 25; ++b) levels.push_back((std::int64_t(1) << (b - 1)) - 1);
    for (std::int64_t s : levels) {
      for (Index n : {Index(1), Index(31), Index(32), Index(33), Index(10007)}) {
        const int bits = qsgd_bits(s);
        INFO("levels " << s << " (" << bits << " bits), n " << n);
        QsgdCodec codec(n, s);
        auto g = random_values(static_cast<std::size_t>(n), static_cast<std::uint64_t>(s * 131 + n));
        g[0] = -0.0f;
        if (n > 3) g[3] = 0.0f;
        const int p = 3;
        const Index stride = codec.payload_words();
        QsgdCodec::Words gathered("gathered", static_cast<std::size_t>(p * stride));
        std::vector<std::uint64_t> keys = {0x1234567890abcdefull, 42, 0xffffffff00000001ull};
        double sum_sq = 0.0;
        for (float v : g) sum_sq += double(v) * v;
        int wrong_words = 0, wrong_norm = 0;
        std::vector<std::vector<float>> decoded(p);  // sign v l per rank, for the decode reference
        std::vector<float> norms(p);
        for (int r = 0; r < p; ++r) {
          auto payload = Kokkos::subview(gathered, std::make_pair(r * stride, (r + 1) * stride));
          codec.encode(exec, to_device(g), keys[r], QsgdCodec::Words(gathered.data() + r * stride, stride));
          exec.fence();
          auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), payload);
          const float v = detail::bits_float(host(0));
          norms[r] = v;
          wrong_norm += std::abs(double(v) - std::sqrt(sum_sq)) > 2 * u32 * std::sqrt(sum_sq);
          const float to_level = v > 0.0f ? static_cast<float>(s) / v : 0.0f;
          std::vector<std::uint32_t> fields(static_cast<std::size_t>(n));
          decoded[r].resize(static_cast<std::size_t>(n));
          for (Index i = 0; i < n; ++i) {
            volatile float x = std::fabs(g[i]) * to_level;  // one rounding, as in the kernels
            const auto lo = static_cast<std::uint32_t>(static_cast<std::int32_t>(x));
            const float frac = x - static_cast<float>(lo);
            std::uint32_t level = lo + (compress::impl::counter_uniform(keys[r], static_cast<std::uint64_t>(i)) < frac);
            level = std::min<std::uint32_t>(level, static_cast<std::uint32_t>(s));
            fields[i] = level | (static_cast<std::uint32_t>(g[i] < 0.0f) << (bits - 1));
            decoded[r][i] = (g[i] < 0.0f ? -1.0f : 1.0f) * v * static_cast<float>(level);
          }
          Kokkos::View<std::uint32_t*, Kokkos::HostSpace> expected("expected", static_cast<std::size_t>(stride));
          for (Index grp = 0; grp < compress::impl::packed_groups(n); ++grp)
            compress::impl::pack_group(expected, 1, grp, n, bits, [&](Index i) { return fields[i]; });
          for (Index w = 1; w < stride; ++w) wrong_words += host(w) != expected(w);
        }
        CHECK(wrong_norm == 0);
        CHECK(wrong_words == 0);
        // Decode: u_i = fl(1 / (s p)) sum_r sign v_r l_r, each term and sum rounded once (or fused):
        // within gamma(p + 2) sum_r v_r l_r / (s p) of the exact mean. A wrong field errs by a
        // multiple of v / (s p), far above that for s up to 2^16.
        FloatView u("u", static_cast<std::size_t>(n));
        codec.decode(exec, gathered, u, p);
        const auto us = to_host(u);
        int off = 0;
        for (Index i = 0; i < n; ++i) {
          double ref = 0.0, mag = 0.0;
          for (int r = 0; r < p; ++r) ref += decoded[r][i], mag += std::abs(decoded[r][i]);
          ref /= double(s) * p;
          off += std::abs(us[i] - ref) > gamma32(p + 2) * mag / (double(s) * p) + 1e-38;
        }
        CHECK(off == 0);
      }
    }
  }
}

TEST_CASE("QSGD decodes to multiples of v / s with |level| <= s", "[qsgd]") {
  Communicator comm;
  const std::size_t n = 2000;
  const std::int64_t s = 5;
  const int p = comm.size();
  QsgdOptions o;
  o.levels = s;
  QsgdExchange ex(comm, static_cast<Index>(n), o);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  const auto g = random_values(n, 11);  // the same on every rank: one norm v
  double sq = 0.0;
  for (float v : g) sq += double(v) * v;
  const float v = static_cast<float>(std::sqrt(sq));
  ex.step(x, to_device(g), sgd, 1.0);
  const auto xs = to_host(x);
  // Rounding: each rank decodes sign v l (one product), p values are summed and scaled by
  // fl(1 / (s p)) (two roundings), and the library's float norm v may differ from this one by the
  // order of its double sum (one float rounding apart): at most gamma32(p + 5) relative to the
  // largest possible sum, s p levels. The grid spacing is 1.
  const double tol = gamma32(p + 5) * double(s * p);
  int off_grid = 0, too_large = 0, wrong_sign = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double levels = -double(xs[i]) * s * p / v;  // sum over ranks of +-l
    off_grid += std::abs(levels - std::round(levels)) > tol;
    too_large += std::abs(levels) > double(s * p) + tol;
    wrong_sign += levels * g[i] < -tol * std::abs(g[i]);
  }
  CHECK(off_grid == 0);
  CHECK(too_large == 0);
  CHECK(wrong_sign == 0);
}

TEST_CASE("QSGD is unbiased: the mean update over many steps is the mean gradient", "[qsgd]") {
  Communicator comm;
  const std::size_t n = 64;
  const int p = comm.size();
  const int steps = 2000;
  for (std::int64_t s : {1, 4}) {
    INFO("levels " << s);
    QsgdOptions o;
    o.levels = s;
    o.seed = 99;
    QsgdExchange ex(comm, static_cast<Index>(n), o);
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    const auto g = random_values(n, 1000u + static_cast<unsigned>(comm.rank()));
    const auto all = allgather(g);
    auto dg = to_device(g);
    for (int t = 0; t < steps; ++t) {
      Kokkos::deep_copy(dg, to_device(g));
      ex.step(x, dg, sgd, 1.0);
    }
    const auto xs = to_host(x);
    // Per rank the decoded entry has variance (v/s)^2 f (1 - f) <= (v/s)^2 / 4; the step's
    // update averages p of them. Tolerance: 5 standard errors of the mean over the steps, plus
    // rounding: |u_t| <= U = sum_r v_r / p, each decode within gamma32(p + 4) U, and x accumulates
    // the steps in float, one rounding of |x_t| <= t U per step (at most u32 steps U after / steps).
    double var = 0.0, big_u = 0.0;
    for (int r = 0; r < p; ++r) {
      double sq = 0.0;
      for (std::size_t i = 0; i < n; ++i) sq += double(all[r * n + i]) * all[r * n + i];
      var += sq / (double(s) * s) / 4.0;
      big_u += std::sqrt(sq) / p;
    }
    const double tol = 5.0 * std::sqrt(var) / p / std::sqrt(double(steps)) + (u32 * steps + gamma32(p + 4)) * big_u;
    int biased = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      double want = 0.0;
      for (int r = 0; r < p; ++r) want += all[r * n + i];
      want /= p;
      const double got = -double(xs[i]) / steps;
      worst = std::max(worst, std::abs(got - want) / tol);
      biased += std::abs(got - want) > tol;
    }
    INFO("worst |mean - g| in tolerances: " << worst);
    CHECK(biased == 0);
  }
}

TEST_CASE("Random-K is unbiased up to n/k: (n/k) times the mean sent vector over many steps is a", "[randomk]") {
  Communicator comm;
  const std::size_t n = 500;
  RandomkOptions o;
  o.ratio = 0.04;  // k = 20
  o.seed = 5;
  RandomkExchange ex(comm, static_cast<Index>(n), o);
  const double k = static_cast<double>(ex.k());
  const int steps = 4000;
  const auto a = random_values(n, 8);
  std::vector<double> sum(n, 0.0);
  for (int t = 0; t < steps; ++t)
    for (Index i : ex.indices(static_cast<std::uint64_t>(t))) sum[static_cast<std::size_t>(i)] += a[i];
  // (n/k) a_i 1[i in S]: mean a_i, standard deviation |a_i| sqrt(n/k - 1).
  int biased = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double est = sum[i] * (double(n) / k) / steps;
    // 5 standard errors; the estimate is a double sum of up to `steps` values, scaled twice.
    const double tol = 5.0 * std::abs(a[i]) * std::sqrt(double(n) / k - 1.0) / std::sqrt(double(steps)) +
                       gamma64(steps + 2) * std::abs(a[i]) * double(n) / k;
    biased += std::abs(est - a[i]) > tol;
  }
  CHECK(biased == 0);
}

TEST_CASE("a non-finite gradient on one rank stops every rank in QSGD, EF-sign and PowerSGD steps", "[qsgd][errors]") {
  Communicator comm;
  const std::size_t n = 3001;
  for (const char* method : {"qsgd", "efsign", "powersgd"}) {
    INFO(method);
    ExchangeConfig cfg;
    cfg.method = method;
    cfg.layout = {{"w", {30, 100}, 0, 3000}, {"b", {1}, 3000, 1}};
    auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    auto g = random_values(n, 5);
    if (comm.rank() == comm.size() - 1) g[1234] = std::numeric_limits<float>::infinity();
    bool threw = false;
    try {
      ex->step(x, to_device(g), sgd, 0.1);
    } catch (const NonFiniteError&) {
      threw = true;
    }
    CHECK(threw);
  }
}

TEST_CASE("QSGD hands MPI the bytes of docs/methods.md", "[qsgd][methods]") {
  const std::uint64_t n = 269322;  // the MLP; s = 256: 10 bits per entry
  check_step_plan("qsgd", {}, {{4 + 4 * ceil_div(n * 10, 32)}, CollectiveKind::allgather, 1});
}
