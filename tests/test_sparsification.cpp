#include "MethodTesting.hpp"
#include "RoundingBounds.hpp"

#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/TopkCodec.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Random.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// Reference: sort all indices by (|a| descending, index ascending), keep k, return ascending.
std::vector<std::uint32_t> reference_topk(const std::vector<float>& a, std::size_t k) {
  std::vector<std::uint32_t> idx(a.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return std::fabs(a[x]) > std::fabs(a[y]); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// SGD (lr 1) reference: x_ref -= (1/p) sum over ranks of what each sent; returns how many entries
// of x lie outside its rounding bound (collective: gathers every rank's `sent`). Every method
// decodes u as a float sum of the p ranks' values and a product with fl(1/p), in some order:
// within gamma32(p + 1) sum_r |sent_r| / p of the mean; the SGD mirror adds the update's rounding.
int sgd_step_mismatches(const std::vector<float>& sent, std::vector<Rounded>& x_ref, const std::vector<float>& x) {
  const std::size_t n = sent.size();
  const int p = world_size();
  const auto all = allgather(sent);
  int off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double u = 0.0, abs_sum = 0.0;
    for (int r = 0; r < p; ++r) {
      u += all[static_cast<std::size_t>(r) * n + i];
      abs_sum += std::abs(all[static_cast<std::size_t>(r) * n + i]);
    }
    sgd_step(x_ref[i], Rounded{u / p, gamma32(p + 1) * abs_sum / p}, 1.0);
    off += !within(x[i], x_ref[i]);
  }
  return off;
}

}  // namespace

TEST_CASE("Top-K selection keeps exactly the k largest magnitudes, ties to the lower index", "[topk]") {
  const ExecutionSpace exec;
  using Algorithm = compress::impl::TopkSelector::Algorithm;
  // Both algorithms run here, whatever the backend's default (the radix select is the device
  // default; testing it on the host keeps its logic under test where no GPU is).
  for (Algorithm algorithm : {Algorithm::radix, Algorithm::sampled}) {
    INFO((algorithm == Algorithm::radix ? "radix" : "sampled"));
    for (std::size_t n : {1u, 5u, 1000u, 100003u}) {
      auto a = random_values(n, n);
      // Ties across the selection boundary: many copies of one magnitude, both signs.
      for (std::size_t i = 0; i < n; i += 7) a[i] = (i % 2 ? 1.25f : -1.25f);
      for (std::size_t k : {std::size_t(1), std::max<std::size_t>(1, n / 1000), std::max<std::size_t>(1, n / 10), n}) {
        INFO("n = " << n << ", k = " << k);
        CHECK(TopkExchange::select(exec, to_device(a), static_cast<Index>(k), algorithm) == reference_topk(a, k));
      }
    }
    // All equal: the lowest indices win; subnormal, zero and huge magnitudes order by value.
    const std::vector<float> flat(50, 2.0f);
    CHECK(TopkExchange::select(exec, to_device(flat), 3, algorithm) == std::vector<std::uint32_t>{0, 1, 2});
    const std::vector<float> spread = {0.0f, -1e-40f, 3e38f, 1e-40f, -0.0f, 1.0f, -3e38f, 2e-45f};
    CHECK(TopkExchange::select(exec, to_device(spread), 5, algorithm) == reference_topk(spread, 5));
  }
}

TEST_CASE("Top-K step: update is the mean of all ranks' sparse vectors; error feedback conserves a", "[topk]") {
  Communicator comm;
  const std::size_t n = 20011;
  ExchangeConfig cfg;
  cfg.method = "topk";
  cfg.options = {{"ratio", "0.01"}};
  auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
  auto& topk = dynamic_cast<TopkExchange&>(*ex);
  const std::size_t k = static_cast<std::size_t>(topk.k());
  CHECK(k == 200);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<float> e_old(n, 0.0f);
  std::vector<Rounded> x_ref(n, exact(0.0));
  for (int step = 0; step < 3; ++step) {
    const auto g = random_values(n, 100u * step + static_cast<unsigned>(comm.rank()));
    std::vector<float> a(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = g[i] + e_old[i];
    const auto want_sel = reference_topk(a, k);
    ex->step(x, to_device(g), sgd, 1.0);
    CHECK(topk.last_selection() == want_sel);
    // e_new = a - sent, exactly.
    const auto e_new = to_host(topk.residual());
    int wrong = 0;
    std::vector<float> sent(n, 0.0f);
    for (auto i : want_sel) sent[i] = a[i];
    for (std::size_t i = 0; i < n; ++i) wrong += e_new[i] != a[i] - sent[i];
    CHECK(wrong == 0);
    // u = (1/p) sum over ranks of the sparse vectors.
    CHECK(sgd_step_mismatches(sent, x_ref, to_host(x)) == 0);
    e_old = e_new;
    CHECK(ex->stats().last_step.bytes_sent == 8 * k);  // k (uint32 index, float32 value) pairs
    CHECK(ex->stats().last_step.messages == 1);
  }
}

TEST_CASE("Random-K: the same k distinct indices on every rank, mean of their values, error feedback", "[randomk]") {
  Communicator comm;
  const std::size_t n = 5003;
  RandomkOptions o;
  o.ratio = 0.02;
  o.seed = 7;
  RandomkExchange ex(comm, static_cast<Index>(n), o);
  const std::size_t k = static_cast<std::size_t>(ex.k());
  CHECK(k == 100);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<float> e_old(n, 0.0f);
  std::vector<Rounded> x_ref(n, exact(0.0));
  for (std::uint64_t step = 0; step < 3; ++step) {
    const auto idx = ex.indices(step);
    REQUIRE(idx.size() == k);
    CHECK(std::adjacent_find(idx.begin(), idx.end()) == idx.end());  // distinct (sorted)
    CHECK(idx.back() < static_cast<Index>(n));
    std::vector<float> as_float(idx.begin(), idx.end());
    const auto all_idx = allgather(as_float);
    int differ = 0;
    for (std::size_t i = 0; i < all_idx.size(); ++i) differ += all_idx[i] != as_float[i % k];
    CHECK(differ == 0);  // every rank drew the same indices
    if (step > 0) CHECK(idx != ex.indices(step - 1));

    const auto g = random_values(n, 31u * step + static_cast<unsigned>(comm.rank()));
    std::vector<float> a(n), sent(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) a[i] = g[i] + e_old[i];
    for (Index i : idx) sent[static_cast<std::size_t>(i)] = a[static_cast<std::size_t>(i)];
    ex.step(x, to_device(g), sgd, 1.0);
    const auto e_new = to_host(ex.residual());
    int wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += e_new[i] != a[i] - sent[i];
    CHECK(wrong == 0);
    CHECK(sgd_step_mismatches(sent, x_ref, to_host(x)) == 0);
    e_old = e_new;
    CHECK(ex.stats().last_step.bytes_sent == 4 * k);  // k float32 values, no indices
    CHECK(ex.stats().last_step.messages == 1);
  }
}

TEST_CASE("a non-finite gradient on one rank stops every rank in Top-K and Random-K steps", "[topk][randomk]") {
  Communicator comm;
  const std::size_t n = 3001;
  for (const char* method : {"topk", "randomk"}) {
    INFO(method);
    ExchangeConfig cfg;
    cfg.method = method;
    auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    auto g = random_values(n, 5);
    if (comm.rank() == comm.size() - 1) g[1234] = std::numeric_limits<float>::quiet_NaN();  // never selected
    bool threw = false;
    try {
      ex->step(x, to_device(g), sgd, 0.1);
    } catch (const NonFiniteError&) {
      threw = true;
    }
    CHECK(threw);
  }
}

TEST_CASE("EF-sign: one bit per entry plus a scale; u is the mean of the scaled signs; e = a - s sign(a)", "[efsign]") {
  Communicator comm;
  // Not multiples of 32; 10001 spans several of the host kernels' blocks (128 words each).
  const std::size_t n = GENERATE(std::size_t(1000), std::size_t(10001));
  INFO("n = " << n);
  EfSignExchange ex(comm, static_cast<Index>(n));
  CHECK(ex.payload_words() == 1 + static_cast<Index>((n + 31) / 32));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<float> e_old(n, 0.0f);
  std::vector<Rounded> x_ref(n, exact(0.0));
  for (int step = 0; step < 3; ++step) {
    auto g = random_values(n, 77u * step + static_cast<unsigned>(comm.rank()));
    g[5] = -e_old[5];  // a = 0 exactly: counts as positive
    std::vector<float> a(n);
    double l1 = 0.0;
    for (std::size_t i = 0; i < n; ++i) a[i] = g[i] + e_old[i], l1 += std::abs(a[i]);
    const auto s = static_cast<float>(l1 / n);
    ex.step(x, to_device(g), sgd, 1.0);
    const auto e_new = to_host(ex.residual());
    int wrong = 0;
    std::vector<float> sent(n);
    for (std::size_t i = 0; i < n; ++i) {
      sent[i] = a[i] < 0 ? -s : s;
      wrong += e_new[i] != a[i] - sent[i];
    }
    CHECK(wrong == 0);
    CHECK(sgd_step_mismatches(sent, x_ref, to_host(x)) == 0);
    CHECK(ex.stats().last_step.bytes_sent == 4 * (1 + (n + 31) / 32));
    e_old = e_new;
  }
}

TEST_CASE("Top-K, Random-K and EF-sign hand MPI the bytes of docs/methods.md", "[topk][randomk][efsign][methods]") {
  const std::uint64_t n = 269322, k = std::llround(0.001 * n);  // the MLP, ratio 0.001
  check_step_plan("topk", {}, {{8 * k}, CollectiveKind::allgather, 1});
  check_step_plan("randomk", {}, {{4 * k}, CollectiveKind::allreduce, 1});
  check_step_plan("efsign", {}, {{4 + 4 * ceil_div(n, 32)}, CollectiveKind::allgather, 1});
}

// The codecs (TopkCodec.hpp, QsgdCodec.hpp, EfSignCodec.hpp) are what a framework's communication
// hook calls around its own all-gather, through the one interface of GatherCodec.hpp: encode,
// gather every rank's payload, decode into the bucket. On the same gradients that must give the
// exchanges' update and residual bit for bit (SGD at lr 1 from x = 0 makes x = -u exactly), step
// after step.
namespace {
template <class Codec>
void check_codec_against_exchange(const Communicator& comm, const std::string& method, Codec codec,
                                  const std::map<std::string, std::string>& options) {
  static_assert(is_gather_codec_v<Codec>);
  INFO(method);
  const Index n = codec.size();
  const auto p = static_cast<std::size_t>(comm.size());
  ExchangeConfig cfg;
  cfg.method = method;
  cfg.options = options;
  auto ex = make_exchange(cfg, comm, n);
  Optimizer sgd(OptimizerConfig{}, n);
  auto x = to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  FloatView e("codec residual", Codec::has_residual ? static_cast<std::size_t>(n) : 0);
  EncodeContext context{cfg.seed, 0, comm.rank(), Kokkos::View<std::int64_t, MemorySpace>("codec non-finite")};
  PayloadView<Codec> payload("payload", static_cast<std::size_t>(codec.payload_words()));
  PayloadView<Codec> all("all", static_cast<std::size_t>(codec.payload_words()) * p);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const auto g = random_values(static_cast<std::size_t>(n), 31u * step + static_cast<unsigned>(comm.rank()));
    Kokkos::deep_copy(x, 0.0f);
    ex->step(x, to_device(g), sgd, 1.0);
    auto buffer = to_device(g);
    context.step = static_cast<std::uint64_t>(step);
    codec.encode(ExecutionSpace(), buffer, e, context, payload);
    Kokkos::fence();
    comm.allgather(payload.data(), payload.extent(0), all.data());
    if (!Codec::decode_overwrites) Kokkos::deep_copy(buffer, 0.0f);
    codec.decode(ExecutionSpace(), all, buffer, comm.size());
    Kokkos::fence();
    const auto u = to_host(buffer), xs = to_host(x);
    int differ = 0;
    for (std::size_t i = 0; i < u.size(); ++i) differ += xs[i] != -u[i];
    CHECK(differ == 0);
    const auto state = ex->state();
    REQUIRE(state.size() == (Codec::has_residual ? 1u : 0u));
    if (Codec::has_residual) {
      const auto es = to_host(e), ref = to_host(state[0].view);
      for (std::size_t i = 0; i < es.size(); ++i) differ += es[i] != ref[i];
      CHECK(differ == 0);
    }
  }
}
}  // namespace

TEST_CASE("the Top-K, QSGD and EF-sign codecs around an outside all-gather reproduce the exchanges bit for bit",
          "[topk][qsgd][efsign][codec]") {
  Communicator comm;
  const Index n = 5003;
  check_codec_against_exchange(comm, "topk", TopkCodec(n, topk_k(0.01, n)), {{"ratio", "0.01"}});
  check_codec_against_exchange(comm, "qsgd", QsgdCodec(n, 256), {});
  check_codec_against_exchange(comm, "efsign", EfSignCodec(n), {});
}

TEST_CASE("the baseline codecs refuse sizes and options they cannot serve", "[topk][qsgd][efsign][codec][errors]") {
  CHECK(topk_k(0.001, 1000) == 1);
  CHECK(topk_k(0.0001, 1000) == 1);  // at least one entry
  CHECK(topk_k(1.0, 1000) == 1000);
  CHECK_THROWS_AS(topk_k(0.0, 1000), InvalidArgument);
  CHECK_THROWS_AS(topk_k(1.5, 1000), InvalidArgument);
  CHECK_THROWS_AS(topk_k(0.5, Index(1) << 32), InvalidArgument);
  CHECK_THROWS_AS(TopkCodec(0, 1), InvalidArgument);
  CHECK_THROWS_AS(TopkCodec(10, 11), InvalidArgument);
  CHECK_THROWS_AS(QsgdCodec(10, 0), InvalidArgument);
  CHECK_THROWS_AS(QsgdCodec(0, 256), InvalidArgument);
  CHECK_THROWS_AS(EfSignCodec(0), InvalidArgument);
  CHECK(QsgdCodec(100, 256).payload_words() == 1 + (100 * 10 + 31) / 32);
  CHECK(EfSignCodec(100).payload_words() == 1 + 4);
  CHECK(QsgdCodec::rounding_key(1, 2, 0) != QsgdCodec::rounding_key(1, 2, 1));
  CHECK(QsgdCodec::rounding_key(1, 2, 0) != QsgdCodec::rounding_key(1, 3, 0));
}
