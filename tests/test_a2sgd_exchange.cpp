#include "MethodTesting.hpp"
#include "RoundingBounds.hpp"

#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/Error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

std::vector<float> random_gradient(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.05f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}

// Host reference of one A2SGD step on this rank, written from docs/algorithm.md.
//
// Tolerances: the library sums the same float values in double in another order, so its local sums
// are within gamma64(n) |sum| of the exact ones and so are the reference's (2 gamma64(n) apart);
// the global values add p terms (gamma64(p)) and the divisions one u64 each. Everything after that
// is float arithmetic, bounded by the Rounded mirror (RoundingBounds.hpp).
struct ReferenceStep {
  std::vector<float> a;                   // g + e
  double mu_pos = 0, mu_neg = 0;          // local averages
  double m_pos = 0, m_neg = 0;            // global averages
  double mu_pos_tol = 0, mu_neg_tol = 0;  // |library - reference| of the local averages
  double m_pos_tol = 0, m_neg_tol = 0;    // ... and of the global ones
  std::vector<Rounded> u;                 // update direction, with the float bound of the library's
  std::vector<Rounded> e;                 // new residual, likewise
};

ReferenceStep reference_step(const std::vector<float>& g, const std::vector<float>& e, const A2sgdOptions& o) {
  ReferenceStep r;
  const std::size_t n = g.size();
  r.a.resize(n);
  double sp = 0, sn = 0, np = 0, nn = 0;
  // Hold: an entry whose gradient is exactly 0 joins neither class (a stays g + e = e).
  const bool hold = o.error_feedback && o.zero_gradient == ZeroGradient::hold;
  std::vector<int> cls(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.a[i] = o.error_feedback ? g[i] + e[i] : g[i];
    cls[i] = hold && g[i] == 0.0f ? 0 : (r.a[i] > 0 ? 1 : (r.a[i] < 0 ? -1 : 0));
    if (cls[i] > 0) sp += r.a[i], np += 1;
    if (cls[i] < 0) sn += r.a[i], nn += 1;
  }
  r.mu_pos = np > 0 ? sp / np : 0.0;
  r.mu_neg = nn > 0 ? sn / nn : 0.0;
  const double p = world_size(), sum_tol = 2 * gamma64(double(n)) + 2 * u64;
  r.mu_pos_tol = sum_tol * std::abs(r.mu_pos);
  r.mu_neg_tol = sum_tol * std::abs(r.mu_neg);
  const auto all_mu_pos = allgather(r.mu_pos, MPI_DOUBLE);
  const auto all_mu_neg = allgather(r.mu_neg, MPI_DOUBLE);
  const auto all_sp = allgather(sp, MPI_DOUBLE), all_sn = allgather(sn, MPI_DOUBLE);
  const auto all_np = allgather(np, MPI_DOUBLE), all_nn = allgather(nn, MPI_DOUBLE);
  double a = 0, b = 0, c = 0, d = 0, abs_a = 0, abs_b = 0;
  for (std::size_t k = 0; k < all_mu_pos.size(); ++k) {
    if (o.averaging == GlobalAveraging::mean) {
      a += all_mu_pos[k], abs_a += std::abs(all_mu_pos[k]);
      b += all_mu_neg[k], abs_b += std::abs(all_mu_neg[k]);
    } else {
      a += all_sp[k], b += all_sn[k], c += all_np[k], d += all_nn[k];
      abs_a += std::abs(all_sp[k]), abs_b += std::abs(all_sn[k]);
    }
  }
  const double global_tol = 2 * (gamma64(double(n)) + gamma64(p) + 2 * u64);
  if (o.averaging == GlobalAveraging::mean) {
    r.m_pos = a / p;
    r.m_neg = b / p;
    r.m_pos_tol = global_tol * abs_a / p;
    r.m_neg_tol = global_tol * abs_b / p;
  } else {
    r.m_pos = c > 0 ? a / c : 0.0;
    r.m_neg = d > 0 ? b / d : 0.0;
    r.m_pos_tol = c > 0 ? global_tol * abs_a / c : 0.0;
    r.m_neg_tol = d > 0 ? global_tol * abs_b / d : 0.0;
  }
  const bool local = o.residual == ResidualReference::local;
  // The kernel's float constants: a double within its tolerance, converted to float.
  const Rounded ref_pos = rounded(local ? r.mu_pos : r.m_pos, local ? r.mu_pos_tol : r.m_pos_tol);
  const Rounded ref_neg = rounded(local ? r.mu_neg : r.m_neg, local ? r.mu_neg_tol : r.m_neg_tol);
  const Rounded upd_pos = rounded(r.m_pos, r.m_pos_tol), upd_neg = rounded(r.m_neg, r.m_neg_tol);
  r.u.resize(n);
  r.e.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float ai = r.a[i];
    // Multiplying by a 0/1 mask and adding 0 are exact.
    r.u[i] = cls[i] > 0 ? upd_pos : (cls[i] < 0 ? upd_neg : exact(0.0));
    r.e[i] = o.error_feedback ? exact(ai) - (cls[i] > 0 ? ref_pos : (cls[i] < 0 ? ref_neg : exact(0.0))) : exact(0.0);
  }
  return r;
}

bool same_on_all_ranks(double v) {
  const auto all = allgather(v, MPI_DOUBLE);
  for (double x : all)
    if (x != all[0]) return false;
  return true;
}

// Segment boundaries of a step: the whole buffer, or each tensor with layer granularity.
std::vector<std::size_t> bounds_of(const A2sgdOptions& o, std::size_t n) {
  std::vector<std::size_t> b{0};
  if (o.granularity == Granularity::layer)
    for (Index size : o.segments) b.push_back(b.back() + static_cast<std::size_t>(size));
  else
    b.push_back(n);
  return b;
}

// Runs `steps` steps of A2SGD with SGD(lr) from x = 0 and checks x, e, M against the reference,
// segment by segment (segment s's gradient scaled by 10^(s - 1), as tensors of different scales).
// With `sparse`, runs of 37 entries get exactly zero gradient in a pattern that changes from step
// to step, as the rows of words absent from a batch do.
void check_against_reference(const A2sgdOptions& o, std::size_t n, int steps, bool sparse = false) {
  Communicator comm;
  A2sgdExchange exchange(comm, static_cast<Index>(n), o);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  const std::vector<std::size_t> bounds = bounds_of(o, n);
  REQUIRE(exchange.segment_bounds().size() == bounds.size());
  REQUIRE(exchange.payload_scalars() ==
          (o.averaging == GlobalAveraging::mean ? 2 : 4) * static_cast<int>(bounds.size() - 1));
  const double lr = 0.5;
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<Rounded> x_ref(n, exact(0.0));
  std::vector<float> e_host(n, 0.0f);
  for (int s = 0; s < steps; ++s) {
    INFO("step " << s);
    auto g = random_gradient(n, 100u * static_cast<unsigned>(s) + static_cast<unsigned>(comm.rank()));
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k)
      for (std::size_t i = bounds[k]; i < bounds[k + 1]; ++i) g[i] *= static_cast<float>(std::pow(10.0, double(k) - 1));
    if (sparse)
      for (std::size_t i = 0; i < n; ++i)
        if ((i / 37 + static_cast<std::size_t>(s)) % 3 == 0) g[i] = 0.0f;
    exchange.step(x, to_device(g), sgd, lr);
    const auto xs = to_host(x);
    const auto es = to_host(exchange.residual());
    for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
      INFO("segment " << k);
      const std::vector<float> gk(g.begin() + bounds[k], g.begin() + bounds[k + 1]);
      const std::vector<float> ek(e_host.begin() + bounds[k], e_host.begin() + bounds[k + 1]);
      const ReferenceStep ref = reference_step(gk, ek, o);
      const auto [m_pos, m_neg] = exchange.last_segment_global_means()[k];
      CHECK_THAT(m_pos, WithinAbs(ref.m_pos, ref.m_pos_tol));
      CHECK_THAT(m_neg, WithinAbs(ref.m_neg, ref.m_neg_tol));
      // Identical on all ranks, bit for bit: they come out of one all-reduce.
      CHECK(same_on_all_ranks(m_pos));
      CHECK(same_on_all_ranks(m_neg));
      int off_values = 0;
      for (std::size_t i = bounds[k]; i < bounds[k + 1]; ++i) {
        sgd_step(x_ref[i], ref.u[i - bounds[k]], lr);
        off_values += !within(xs[i], x_ref[i]);
        off_values += !within(es[i], ref.e[i - bounds[k]]);
      }
      CHECK(off_values == 0);
    }
    e_host = es;  // the residual is carried into the next step
  }
}

}  // namespace

TEST_CASE("one A2SGD step: the update takes only the values M_pos, M_neg and 0", "[a2sgd]") {
  Communicator comm;
  const std::size_t n = 10007;
  A2sgdExchange exchange(comm, static_cast<Index>(n));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto g = random_gradient(n, 7u + static_cast<unsigned>(comm.rank()));
  for (std::size_t i = 0; i < n; i += 97) g[i] = 0.0f;  // zeros get a zero update
  auto x = to_device(std::vector<float>(n, 0.0f));
  exchange.step(x, to_device(g), sgd, 1.0);  // x = -u

  const auto [m_pos, m_neg] = exchange.last_global_means();
  const auto [mu_pos, mu_neg] = exchange.last_local_means();
  CHECK(m_pos > 0.0);
  CHECK(m_neg < 0.0);
  CHECK(same_on_all_ranks(m_pos));
  CHECK(same_on_all_ranks(m_neg));
  // M = mean over ranks of the local means (the default "mean" averaging).
  const auto mus = allgather(mu_pos, MPI_DOUBLE);
  double mean_mu = 0;
  for (double v : mus) mean_mu += v;
  // The same p doubles summed in two orders and divided by p.
  double abs_mu = 0;
  for (double v : mus) abs_mu += std::abs(v);
  CHECK_THAT(m_pos, WithinAbs(mean_mu / comm.size(), 2 * (gamma64(comm.size()) + u64) * abs_mu / comm.size()));

  const auto xs = to_host(x);
  const auto es = to_host(exchange.residual());
  int wrong_update = 0;
  double residual_pos = 0, residual_neg = 0, scale_pos = 0, scale_neg = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float expect = g[i] > 0 ? static_cast<float>(-m_pos) : (g[i] < 0 ? static_cast<float>(-m_neg) : 0.0f);
    if (xs[i] != expect) ++wrong_update;
    if (g[i] > 0) residual_pos += es[i], scale_pos += std::abs(g[i]) + std::abs(es[i]);
    if (g[i] < 0) residual_neg += es[i], scale_neg += std::abs(g[i]) + std::abs(es[i]);
    if (g[i] == 0 && es[i] != 0.0f) ++wrong_update;
  }
  CHECK(wrong_update == 0);
  // e keeps each entry's deviation from its own local average: it sums to 0 over each sign set up
  // to rounding. e_i = fl(g_i - fl(mu)) = (g_i - fl(mu))(1 + d_i), and n |mu - fl(mu)| <= (u32 +
  // gamma64(n) + u64) sum |g| (mu is a double mean of the set); the d_i add u32 sum |e|, this
  // test's double sum gamma64(n) sum |e|.
  const double tol = (u32 + 2 * gamma64(double(n))) * (1 + u32);
  CHECK(std::abs(residual_pos) <= tol * scale_pos);
  CHECK(std::abs(residual_neg) <= tol * scale_neg);
}

TEST_CASE("A2SGD matches the reference over several steps (residual carried)", "[a2sgd]") {
  A2sgdOptions o;
  SECTION("defaults: mean, local residual") {
    check_against_reference(o, 4099, 4);
  }
  SECTION("count-weighted global averages") {
    o.averaging = GlobalAveraging::weighted;
    check_against_reference(o, 4099, 3);
  }
  SECTION("residual measured against the global averages") {
    o.residual = ResidualReference::global;
    check_against_reference(o, 1025, 3);
  }
  SECTION("error feedback off: the residual stays zero") {
    o.error_feedback = false;
    check_against_reference(o, 1025, 3);
  }
  SECTION("layer granularity: two means per tensor, scales 0.1 to 100") {
    o.granularity = Granularity::layer;
    o.segments = {1000, 7, 3000, 92};
    check_against_reference(o, 4099, 4);
  }
  SECTION("layer granularity with count-weighted averages and a one-value tensor") {
    o.granularity = Granularity::layer;
    o.averaging = GlobalAveraging::weighted;
    o.segments = {1, 1024};
    check_against_reference(o, 1025, 3);
  }
  SECTION("zero gradients moved (the default), with sparse gradients") {
    check_against_reference(o, 4099, 4, true);
  }
  SECTION("zero gradients held") {
    o.zero_gradient = ZeroGradient::hold;
    check_against_reference(o, 4099, 4, true);
  }
  SECTION("zero gradients held, layer granularity, count-weighted, global residual") {
    o.zero_gradient = ZeroGradient::hold;
    o.granularity = Granularity::layer;
    o.averaging = GlobalAveraging::weighted;
    o.residual = ResidualReference::global;
    o.segments = {1000, 7, 3000, 92};
    check_against_reference(o, 4099, 4, true);
  }
  SECTION("zero gradients held without error feedback: the same as moved") {
    o.zero_gradient = ZeroGradient::hold;
    o.error_feedback = false;
    check_against_reference(o, 1025, 3, true);
  }
}

TEST_CASE("A2SGD with held zero gradients: an entry without gradient neither moves nor sheds its residual", "[a2sgd]") {
  Communicator comm;
  const std::size_t n = 5003;
  for (ZeroGradient zeros : {ZeroGradient::move, ZeroGradient::hold}) {
    INFO("zero gradient " << to_string(zeros));
    A2sgdOptions o;
    o.zero_gradient = zeros;
    A2sgdExchange exchange(comm, static_cast<Index>(n), o);
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    // A first step with every entry's gradient leaves a residual almost everywhere...
    exchange.step(x, to_device(random_gradient(n, 3u + static_cast<unsigned>(comm.rank()))), sgd, 1.0);
    const auto x1 = to_host(x), e1 = to_host(exchange.residual());
    // ...then the first half of the entries gets none.
    auto g = random_gradient(n, 11u + static_cast<unsigned>(comm.rank()));
    for (std::size_t i = 0; i < n / 2; ++i) g[i] = 0.0f;
    exchange.step(x, to_device(g), sgd, 1.0);
    const auto x2 = to_host(x), e2 = to_host(exchange.residual());
    const auto [m_pos, m_neg] = exchange.last_global_means();
    int zero_moved = 0, zero_residual_changed = 0, wrong_update = 0;
    std::size_t with_residual = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float a = g[i] + e1[i];
      const bool active = zeros == ZeroGradient::move || g[i] != 0.0f;
      const float expect = !active ? 0.0f
                           : a > 0 ? static_cast<float>(m_pos)
                                   : (a < 0 ? static_cast<float>(m_neg) : 0.0f);
      wrong_update += x2[i] != x1[i] - expect;
      if (g[i] == 0.0f) {
        with_residual += e1[i] != 0.0f;
        zero_moved += x2[i] != x1[i];
        zero_residual_changed += e2[i] != e1[i];
      }
    }
    CHECK(wrong_update == 0);
    REQUIRE(with_residual > n / 4);  // the property below is about entries with a residual
    if (zeros == ZeroGradient::hold) {
      CHECK(zero_moved == 0);
      CHECK(zero_residual_changed == 0);
    } else {
      // The specification's step moves every entry with a non-zero residual.
      CHECK(zero_moved == static_cast<int>(with_residual));
    }
  }
  CHECK_THROWS_WITH(parse_zero_gradient("keep"), A2SGD_CONTAINS("move, hold"));
}

TEST_CASE("A2SGD with decoded moments fuses momentum and Adam into its update pass", "[a2sgd][optim]") {
  for (OptimizerKind kind : {OptimizerKind::momentum, OptimizerKind::adam}) {
    INFO("optimizer " << to_string(kind));
    Communicator comm;
    const std::size_t n = 999;
    A2sgdOptions decoded;
    decoded.moments = MomentScheme::decoded;  // the optimizer's moments follow the decoded update
    A2sgdExchange exchange(comm, static_cast<Index>(n), decoded);
    OptimizerConfig cfg;
    cfg.kind = kind;
    Optimizer opt(cfg, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 1.0f));
    std::vector<Rounded> xr(n, exact(1.0)), m(n), v(n);
    std::vector<float> e(n, 0.0f);
    const double lr = 0.01;
    for (int t = 1; t <= 3; ++t) {
      const auto g = random_gradient(n, 50u * static_cast<unsigned>(t) + static_cast<unsigned>(comm.rank()));
      const auto ref = reference_step(g, e, A2sgdOptions{});
      exchange.step(x, to_device(g), opt, lr);
      e = to_host(exchange.residual());
      for (std::size_t i = 0; i < n; ++i) {
        if (kind == OptimizerKind::momentum)
          momentum_step(xr[i], m[i], ref.u[i], lr, 0.9);
        else
          adam_step(xr[i], m[i], v[i], ref.u[i], lr, t);
      }
    }
    const auto xs = to_host(x);
    int off = 0;
    for (std::size_t i = 0; i < n; ++i) off += !within(xs[i], xr[i]);
    CHECK(off == 0);
  }
}

TEST_CASE("A2SGD hands exactly one all-reduce of 2 (or 4) doubles to MPI per step, whatever n", "[a2sgd][accounting]") {
  Communicator comm;
  for (std::size_t n : {1u, 10u, 1000u, 200000u}) {
    INFO("n = " << n);
    for (auto averaging : {GlobalAveraging::mean, GlobalAveraging::weighted}) {
      A2sgdOptions o;
      o.averaging = averaging;
      A2sgdExchange exchange(comm, static_cast<Index>(n), o);
      Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
      auto x = to_device(std::vector<float>(n, 0.0f));
      for (int s = 0; s < 3; ++s) exchange.step(x, to_device(random_gradient(n, static_cast<unsigned>(s))), sgd, 0.1);
      const std::uint64_t bytes = averaging == GlobalAveraging::mean ? 2 * sizeof(double) : 4 * sizeof(double);
      const auto& st = exchange.stats();
      CHECK(st.last_step.bytes_sent == bytes);
      CHECK(st.last_step.messages == 1);
      CHECK(st.total.bytes_sent == 3 * bytes);
      CHECK(st.total.messages == 3);
      CHECK(st.steps == 3);
      CHECK(st.last_step.compress_s > 0.0);
      CHECK(st.last_step.optimizer_s > 0.0);
      CHECK(st.last_step.comm_s > 0.0);
    }
  }
  SECTION("layer granularity: one all-reduce of 2 L doubles") {
    A2sgdOptions o;
    o.granularity = Granularity::layer;
    o.segments = {5, 1, 994};
    A2sgdExchange exchange(comm, 1000, o);
    CHECK(exchange.step_traffic().front().bytes == 6 * sizeof(double));
    Optimizer sgd(OptimizerConfig{}, 1000);
    auto x = to_device(std::vector<float>(1000, 0.0f));
    exchange.step(x, to_device(random_gradient(1000, 3)), sgd, 0.1);
    CHECK(exchange.stats().last_step.bytes_sent == 6 * sizeof(double));
    CHECK(exchange.stats().last_step.messages == 1);
  }
  SECTION("layer granularity needs tensors that cover n") {
    A2sgdOptions o;
    o.granularity = Granularity::layer;
    o.segments = {5, 6};
    CHECK_THROWS_WITH(A2sgdExchange(comm, 12, o), A2SGD_CONTAINS("cover 11 values, not n = 12"));
  }
}

TEST_CASE("A2SGD dense warm-up and periodic model averaging", "[a2sgd]") {
  Communicator comm;
  const std::size_t n = 3001;
  A2sgdOptions o;
  o.warmup_steps = 2;
  o.average_every = 3;
  A2sgdExchange exchange(comm, static_cast<Index>(n), o);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<std::uint64_t> bytes;
  for (int s = 0; s < 6; ++s) {
    exchange.step(x, to_device(random_gradient(n, 10u * static_cast<unsigned>(s) + static_cast<unsigned>(comm.rank()))),
                  sgd, 0.1);
    bytes.push_back(exchange.stats().last_step.bytes_sent);
    if (s < 2) {
      // Warm-up is dense: the residual is untouched.
      int nonzero = 0;
      for (float v : to_host(exchange.residual())) nonzero += v != 0.0f;
      CHECK(nonzero == 0);
    }
    if (s == 2 || s == 5) {
      // Averaging after steps 3 and 6 leaves all replicas identical.
      const auto xs = allgather(to_host(x));
      int differ = 0;
      for (std::size_t i = n; i < xs.size(); ++i) differ += xs[i] != xs[i % n];
      CHECK(differ == 0);
    }
  }
  const std::uint64_t dense = 4 * n, scalars = 16;
  CHECK(bytes == std::vector<std::uint64_t>{dense, dense, scalars + dense, scalars, scalars, scalars + dense});
  CHECK(exchange.stats().total.messages == 2 + 4 + 2);
}

// --a2sgd-state-at-average: at each periodic average the optimizer's first moment (momentum buffer,
// Adam's m) is averaged over the ranks like the parameters (one more all-reduce of 4n bytes) or set
// to zero; Adam's v and the residual stay per rank, and between averages nothing changes.
TEST_CASE("A2SGD's first moment at the periodic average: keep, average, reset", "[a2sgd][optim]") {
  Communicator comm;
  const std::size_t n = 2001;
  for (const OptimizerKind kind : {OptimizerKind::momentum, OptimizerKind::adam}) {
    for (const StateAtAverage rule : {StateAtAverage::keep, StateAtAverage::average, StateAtAverage::reset}) {
      INFO((kind == OptimizerKind::adam ? "adam" : "momentum") << ", " << to_string(rule));
      A2sgdOptions o;
      o.average_every = 2;
      o.state_at_average = rule;
      A2sgdExchange exchange(comm, static_cast<Index>(n), o);
      OptimizerConfig cfg;
      cfg.kind = kind;
      Optimizer opt(cfg, static_cast<Index>(n));
      auto x = to_device(std::vector<float>(n, 0.0f));
      std::vector<std::vector<float>> before;  // every state tensor just before the averaging step's average
      for (int s = 0; s < 2; ++s) {
        const auto g = random_gradient(n, 31u * static_cast<unsigned>(s) + static_cast<unsigned>(comm.rank()));
        if (s == 1) {
          // The state the averaging step starts from plus this step's own moment update: replay the
          // step's local direction on a copy of the optimizer to know the pre-average moments.
          Optimizer copy(cfg, static_cast<Index>(n));
          const auto src = opt.state(), dst = copy.state();
          for (std::size_t k = 0; k < src.size(); ++k) Kokkos::deep_copy(dst[k].view, src[k].view);
          copy.local_direction(ExecutionSpace(), to_device(g), MomentScheme::local, 0);
          for (const NamedView& v : copy.state()) before.push_back(to_host(v.view));
        }
        exchange.step(x, to_device(g), opt, 0.01);
        const std::uint64_t expected = 16 + (s == 1 ? 4 * n * (rule == StateAtAverage::average ? 2 : 1) : 0);
        CHECK(exchange.stats().last_step.bytes_sent == expected);
      }
      const auto state = opt.state();
      const auto first = to_host(state.front().view);
      const auto all_first = allgather(before.front());
      int bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        double mean = 0.0, magnitude = 0.0;
        for (int r = 0; r < comm.size(); ++r) {
          mean += all_first[static_cast<std::size_t>(r) * n + i];
          magnitude += std::abs(all_first[static_cast<std::size_t>(r) * n + i]);
        }
        mean /= comm.size();
        // A float sum over p ranks in any order errs by at most (p - 1) u sum |v_r|, so the mean by
        // (p - 1) / p u sum |v_r|, and the scaling by 1/p adds u |mean|: within 2 u (sum |v_r| +
        // |mean|) of the exact mean, u = 2^-24.
        const double bound = 2.0 * 0x1p-24 * (magnitude + std::abs(mean)) + 1e-38;
        switch (rule) {
          case StateAtAverage::keep:
            bad += first[i] != before.front()[i];
            break;
          case StateAtAverage::average:
            bad += std::abs(first[i] - mean) > bound;
            break;
          case StateAtAverage::reset:
            bad += first[i] != 0.0f;
            break;
        }
      }
      CHECK(bad == 0);
      if (kind == OptimizerKind::adam) CHECK(to_host(state.back().view) == before.back());  // v stays per rank
      // The plan states the extra all-reduce where there is one.
      CHECK(exchange.step_traffic().size() == (rule == StateAtAverage::average ? 3u : 2u));
    }
  }
  CHECK_THROWS_WITH(parse_state_at_average("drop"), A2SGD_CONTAINS("keep, average, reset"));
  A2sgdOptions never;
  never.state_at_average = StateAtAverage::reset;
  CHECK_THROWS_WITH(A2sgdExchange(comm, static_cast<Index>(n), never),
                    A2SGD_CONTAINS("needs an averaging period K > 0"));
  // Plain SGD has no first moment: the step says so on every rank instead of doing nothing.
  A2sgdOptions o;
  o.average_every = 1;
  o.state_at_average = StateAtAverage::average;
  A2sgdExchange exchange(comm, static_cast<Index>(n), o);
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  CHECK_THROWS_WITH(exchange.step(x, to_device(random_gradient(n, 5)), sgd, 0.1), A2SGD_CONTAINS("first moment"));
}

TEST_CASE("a non-finite gradient on one rank stops every rank and changes nothing", "[a2sgd][errors]") {
  Communicator comm;
  const std::size_t n = 513;
  A2sgdExchange exchange(comm, static_cast<Index>(n));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  exchange.step(x, to_device(random_gradient(n, 1u + static_cast<unsigned>(comm.rank()))), sgd, 0.1);
  const auto x_before = to_host(x);
  const auto e_before = to_host(exchange.residual());

  const int bad_rank = comm.size() - 1;
  auto g = random_gradient(n, 99);
  if (comm.rank() == bad_rank) g[100] = std::numeric_limits<float>::quiet_NaN();
  bool threw = false;
  try {
    exchange.step(x, to_device(g), sgd, 0.1);
  } catch (const NonFiniteError& err) {
    threw = true;
    CHECK_THAT(err.what(), A2SGD_CONTAINS(comm.rank() == bad_rank ? "1 non-finite" : "another rank"));
  }
  CHECK(threw);
  CHECK(to_host(x) == x_before);
  CHECK(to_host(exchange.residual()) == e_before);
  CHECK(exchange.steps() == 1);
}

TEST_CASE("ranks that disagree on n or on the options fail together at construction", "[a2sgd][errors]") {
  Communicator comm;
  if (comm.size() == 1) return;
  const Index n = comm.rank() == 1 ? 101 : 100;
  CHECK_THROWS_WITH(A2sgdExchange(comm, n), A2SGD_CONTAINS("ranks disagree on the number of parameters n"));
  A2sgdOptions o;
  if (comm.rank() == 0) o.averaging = GlobalAveraging::weighted;
  CHECK_THROWS_WITH(A2sgdExchange(comm, 100, o), A2SGD_CONTAINS("exchange method and its options"));
  ExchangeConfig cfg;
  cfg.method = comm.rank() == 0 ? "dense" : "a2sgd";
  CHECK_THROWS_AS(make_exchange(cfg, comm, 100), CollectiveError);
}

TEST_CASE("exchange methods are selected by name", "[a2sgd][factory]") {
  Communicator comm;
  // The names are the registry's, in its order, each once.
  std::string valid;
  std::vector<std::string> names;
  for (const auto& m : exchange_registry()) {
    valid += (valid.empty() ? "" : ", ") + m.name;
    names.push_back(m.name);
    CHECK(std::count(names.begin(), names.end(), m.name) == 1);
  }
  CHECK(exchange_methods() == names);
  CHECK(std::count(names.begin(), names.end(), "a2sgd") == 1);
  ExchangeConfig cfg;
  auto ex = make_exchange(cfg, comm, 10);
  CHECK(ex->name() == "a2sgd");
  REQUIRE(ex->state().size() == 1);
  CHECK(ex->state()[0].name == "residual");
  CHECK(ex->state()[0].view.extent(0) == 10);
  cfg.method = "topk-typo";
  CHECK_THROWS_WITH(make_exchange(cfg, comm, 10), A2SGD_CONTAINS("valid: " + valid));
  // An option the method does not declare.
  cfg.method = "a2sgd";
  cfg.options = {{"ratio", "0.1"}};
  CHECK_THROWS_WITH(make_exchange(cfg, comm, 10), A2SGD_CONTAINS("a2sgd ratio: no such option"));
  cfg.options.clear();
  // Known on some ranks only: every rank fails, none waits in the constructor's collectives.
  cfg.method = comm.rank() == 0 ? "a2sgd" : "a2sgd-typo";
  if (comm.size() > 1) CHECK_THROWS_AS(make_exchange(cfg, comm, 10), CollectiveError);
  CHECK_THROWS_WITH(parse_global_averaging("median"), A2SGD_CONTAINS("mean, weighted"));
  CHECK_THROWS_WITH(parse_residual_reference("x"), A2SGD_CONTAINS("local, global"));
}

TEST_CASE("local moment schemes: A2SGD compresses each rank's optimizer direction", "[a2sgd][optim]") {
  // docs/algorithm.md, "Momentum and Adam with A2SGD": the moments follow this rank's own gradient,
  // the direction d they give is what the two means compress (a = d + e), every rank moves by
  // -lr u with u in {M_pos, M_neg, 0}, and the residual keeps a minus its local mean.
  struct Case {
    OptimizerKind kind;
    MomentScheme scheme;
    std::uint64_t warmup;
  };
  for (const Case& k :
       {Case{OptimizerKind::momentum, MomentScheme::local, 0}, Case{OptimizerKind::adam, MomentScheme::local, 0},
        Case{OptimizerKind::adam, MomentScheme::frozen, 2}}) {
    INFO("optimizer " << to_string(k.kind) << ", moments " << to_string(k.scheme));
    Communicator comm;
    const std::size_t n = 777;
    A2sgdOptions o;
    o.moments = k.scheme;
    o.warmup_steps = k.warmup;
    A2sgdExchange exchange(comm, static_cast<Index>(n), o);
    OptimizerConfig cfg;
    cfg.kind = k.kind;
    Optimizer opt(cfg, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 1.0f));
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int t = 1; t <= 5; ++t) {
      INFO("step " << t);
      const auto g = random_gradient(n, 70u * static_cast<unsigned>(t) + static_cast<unsigned>(comm.rank()));
      const auto x0 = to_host(x), e0 = to_host(exchange.residual());
      const auto first0 = to_host(opt.state()[0].view);
      const auto second0 = k.kind == OptimizerKind::adam ? to_host(opt.state()[1].view) : std::vector<float>();
      exchange.step(x, to_device(g), opt, lr);
      if (static_cast<std::uint64_t>(t) <= k.warmup) continue;  // dense warm-up: the plain optimizer
      const auto x1 = to_host(x), e1 = to_host(exchange.residual());
      const auto first1 = to_host(opt.state()[0].view);
      const auto second1 = k.kind == OptimizerKind::adam ? to_host(opt.state()[1].view) : std::vector<float>();
      const auto [m_pos, m_neg] = exchange.last_global_means();
      const auto [mu_pos, mu_neg] = exchange.last_local_means();
      CHECK(same_on_all_ranks(m_pos));
      CHECK(same_on_all_ranks(m_neg));
      REQUIRE(m_pos > 0.0);
      REQUIRE(m_neg < 0.0);
      const double c1 = 1.0 / (1.0 - std::pow(b1, t));
      const double c2 = 1.0 / std::sqrt(1.0 - std::pow(b2, k.scheme == MomentScheme::frozen ? double(k.warmup) : t));
      int bad_state = 0, bad_update = 0, bad_residual = 0, frozen_changed = 0;
      for (std::size_t i = 0; i < n; ++i) {
        Rounded d;
        if (k.kind == OptimizerKind::momentum) {
          bad_state += !within(first1[i], to_float(0.9) * exact(first0[i]) + exact(g[i]));
          d = exact(first1[i]);
        } else {
          const Rounded one = exact(1.0);
          bad_state += !within(first1[i], to_float(b1) * exact(first0[i]) + (one - to_float(b1)) * exact(g[i]));
          if (k.scheme == MomentScheme::frozen)
            frozen_changed += second1[i] != second0[i];
          else
            bad_state += !within(second1[i],
                                 to_float(b2) * exact(second0[i]) + (one - to_float(b2)) * exact(g[i]) * exact(g[i]));
          d = (exact(first1[i]) * to_float(c1)) / (sqrt(exact(second1[i])) * to_float(c2) + to_float(eps));
        }
        // The sign class of a = d + e from the move: u = M_pos, M_neg or 0.
        const double moved = double(x0[i]) - double(x1[i]);
        const int cls = moved > 0 ? 1 : (moved < 0 ? -1 : 0);
        const Rounded u = exact(cls > 0 ? m_pos : (cls < 0 ? m_neg : 0.0));
        Rounded xr = exact(x0[i]);
        sgd_step(xr, Rounded{u.v, std::abs(u.v) * u32}, lr);
        bad_update += !within(x1[i], xr);
        const Rounded a = d + exact(e0[i]);
        bad_update += cls != 0 && (a.v > a.e ? 1 : (a.v < -a.e ? -1 : cls)) != cls;  // the class is a's sign
        const Rounded ref = exact(cls > 0 ? mu_pos : (cls < 0 ? mu_neg : 0.0));
        bad_residual += !within(e1[i], a - Rounded{ref.v, std::abs(ref.v) * u32});
      }
      CHECK(bad_state == 0);
      CHECK(frozen_changed == 0);
      CHECK(bad_update == 0);
      CHECK(bad_residual == 0);
    }
  }
}

TEST_CASE("moment schemes the optimizer does not define are refused", "[a2sgd][optim][errors]") {
  OptimizerConfig momentum;
  momentum.kind = OptimizerKind::momentum;
  CHECK_THROWS_WITH(check_moment_scheme(momentum, MomentScheme::frozen, 10), A2SGD_CONTAINS("Adam only"));
  OptimizerConfig adam;
  adam.kind = OptimizerKind::adam;
  CHECK_THROWS_WITH(check_moment_scheme(adam, MomentScheme::frozen, 0), A2SGD_CONTAINS("warm-up"));
  CHECK_NOTHROW(check_moment_scheme(adam, MomentScheme::frozen, 1));
  momentum.nesterov = true;
  CHECK_THROWS_WITH(check_moment_scheme(momentum, MomentScheme::local, 0), A2SGD_CONTAINS("Nesterov"));
  CHECK_NOTHROW(check_moment_scheme(momentum, MomentScheme::decoded, 0));
  CHECK_THROWS_WITH(parse_moment_scheme("late"), A2SGD_CONTAINS("decoded, local, frozen"));
}

TEST_CASE("A2SGD hands MPI 16 bytes per step on any model (docs/methods.md)", "[a2sgd][methods]") {
  check_step_plan("a2sgd", {}, {{16}, CollectiveKind::allreduce, 1});
  check_step_plan("a2sgd", {{"granularity", "layer"}}, {{16 * 6}, CollectiveKind::allreduce, 1});  // 6 tensors
}

// The codec (A2sgdCodec.hpp) is what a framework's communication hook calls around its own
// all-reduce: encode, SUM of the payload over the ranks, global means, decode in place. On the same
// gradients it must give the exchange's update and residual bit for bit (SGD at lr 1 from x = 0
// makes x = -u exactly), step after step.
TEST_CASE("the A2SGD codec around an outside all-reduce reproduces the exchange bit for bit", "[a2sgd][codec]") {
  Communicator comm;
  const std::size_t n = 5003;
  std::vector<A2sgdOptions> variants(6);
  variants[1].averaging = GlobalAveraging::weighted;
  variants[2].residual = ResidualReference::global;
  variants[3].zero_gradient = ZeroGradient::hold;
  variants[4].granularity = Granularity::layer, variants[4].segments = {1000, 3, 4000};
  variants[5].error_feedback = false;
  for (const A2sgdOptions& o : variants) {
    INFO("averaging " << to_string(o.averaging) << ", residual " << to_string(o.residual) << ", zero-gradient "
                      << to_string(o.zero_gradient) << ", granularity " << to_string(o.granularity)
                      << ", error feedback " << o.error_feedback);
    A2sgdExchange exchange(comm, static_cast<Index>(n), o);
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    const A2sgdCodec codec(static_cast<Index>(n), codec_options(o),
                           o.granularity == Granularity::layer ? o.segments : std::vector<Index>{});
    const std::size_t segments = codec.segments();
    FloatView e("codec residual", n);
    std::vector<TwoMeansResult> local(segments);
    std::vector<double> payload(static_cast<std::size_t>(codec.payload_words()));
    std::vector<std::pair<double, double>> mu(segments), m(segments);
    for (int s = 0; s < 3; ++s) {
      INFO("step " << s);
      auto g = random_gradient(n, 7u * static_cast<unsigned>(s) + static_cast<unsigned>(comm.rank()));
      for (std::size_t i = 0; i < n; i += 11) g[i] = 0.0f;  // exact zeros: hold's case
      Kokkos::deep_copy(x, 0.0f);
      exchange.step(x, to_device(g), sgd, 1.0);
      auto buffer = to_device(g);
      CHECK(codec.encode(ExecutionSpace(), buffer, e, local.data(), payload.data()) == 0);
      comm.allreduce(payload.data(), payload.size(), MPI_SUM);
      codec.global_means(payload.data(), comm.size(), m.data());
      for (std::size_t k = 0; k < segments; ++k) {
        mu[k] = {local[k].mean_pos(), local[k].mean_neg()};
        CHECK(m[k] == exchange.last_segment_global_means()[k]);
      }
      codec.decode_in_place(ExecutionSpace(), buffer, e, mu.data(), m.data());
      const auto u = to_host(buffer), xs = to_host(x), es = to_host(e), ex = to_host(exchange.residual());
      int differ = 0;
      for (std::size_t i = 0; i < n; ++i) differ += (xs[i] != -u[i]) + (es[i] != ex[i]);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("the A2SGD codec's segment bounds refuse tensors that do not cover the buffer", "[a2sgd][codec][errors]") {
  CHECK(A2sgdCodec::segment_bounds(10, {}) == std::vector<Index>{0, 10});
  CHECK(A2sgdCodec::segment_bounds(10, {4, 6}) == std::vector<Index>{0, 4, 10});
  CHECK_THROWS_AS(A2sgdCodec::segment_bounds(10, {4, 5}), InvalidArgument);
  CHECK_THROWS_AS(A2sgdCodec::segment_bounds(10, {10, 0}), InvalidArgument);
  CHECK_THROWS_AS(A2sgdCodec::segment_bounds(-1, {}), InvalidArgument);
  CHECK_THROWS_AS(A2sgdCodec(10, {}, {4, 5}), InvalidArgument);
  CHECK(A2sgdCodec(10, {}, {4, 6}).payload_words() == 4);
}

TEST_CASE("A2SGD by layer in gradient buckets: overlapped and not bit for bit, and the one-all-reduce step's result",
          "[a2sgd][buckets]") {
  // Three buckets of whole tensors (the MLP's layers, last first); per bucket its segments are
  // encoded (after the optimizer's local direction, for momentum and Adam) and all-reduced on their
  // own. Overlapped or not, the same collectives: equal bit for bit. Against the unbucketed step
  // (one all-reduce of every segment's scalars) every entry's sum over ranks is the same sum; at
  // 1 and 2 ranks an all-reduce of any shape adds the same one or two doubles, so equal bit for
  // bit as well (at more ranks MPI may associate the sums differently for other message sizes).
  Communicator comm;
  ParameterStore store = fmnist_mlp_store();
  const auto n = static_cast<Index>(store.tensors().back().offset + store.tensors().back().size);
  const std::vector<GradientRange> order = mlp_backward_order(store);
  const ExecutionSpace exec;
  struct Case {
    OptimizerKind kind;
    std::uint64_t warmup;
    GlobalAveraging averaging;
  };
  for (const Case& k :
       {Case{OptimizerKind::sgd, 0, GlobalAveraging::mean}, Case{OptimizerKind::momentum, 1, GlobalAveraging::mean},
        Case{OptimizerKind::adam, 0, GlobalAveraging::weighted}}) {
    INFO(to_string(k.kind) << ", warm-up " << k.warmup << ", " << to_string(k.averaging));
    // 0: buckets not overlapped; 1: overlapped; 2: no buckets (one all-reduce per step).
    std::unique_ptr<Exchange> ex[3];
    std::vector<std::unique_ptr<Optimizer>> opt;
    std::vector<FloatView> x;
    for (int v = 0; v < 3; ++v) {
      ExchangeConfig cfg;
      cfg.method = "a2sgd";
      cfg.layout = store.tensors();
      cfg.options["granularity"] = "layer";
      cfg.options["buckets"] = "on";
      cfg.options["averaging"] = to_string(k.averaging);
      cfg.options["warmup-steps"] = std::to_string(k.warmup);
      cfg.common.buckets.first_bytes = 100000;
      cfg.common.buckets.bytes = 300000;
      cfg.common.buckets.overlap = v == 1;
      ex[v] = make_exchange(cfg, comm, n);
      if (v < 2) ex[v]->plan_buckets(order);
      OptimizerConfig ocfg;
      ocfg.kind = k.kind;
      opt.push_back(std::make_unique<Optimizer>(ocfg, n));
      x.push_back(to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f)));
    }
    REQUIRE(ex[1]->buckets().size() == 3);
    REQUIRE(ex[1]->exchanges_buckets());
    const int width = k.averaging == GlobalAveraging::weighted ? 4 : 2;
    // Per bucket one all-reduce of its segments' scalars: 2 tensors each, 8 bytes a scalar.
    const auto traffic = ex[1]->step_traffic();
    REQUIRE(traffic.size() == 3);
    for (const auto& c : traffic) CHECK(c.bytes == 8u * 2u * static_cast<std::uint64_t>(width));
    for (int step = 0; step < 4; ++step) {
      INFO("step " << step);
      Rng rng(100 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(comm.rank()));
      std::vector<float> g(static_cast<std::size_t>(n));
      for (auto& v : g) v = static_cast<float>(0.01 * rng.normal());
      for (int v = 0; v < 3; ++v) {
        auto grad = to_device(g);
        GradientListener* listener = ex[v]->begin_step(grad, *opt[v]);
        CHECK((listener != nullptr) == (v == 1));
        if (listener)
          for (const GradientRange& group : order) listener->gradient_ready(exec, group);
        ex[v]->step(x[v], grad, *opt[v], 0.01);
        const StepStats& s = ex[v]->stats().last_step;
        const bool dense = static_cast<std::uint64_t>(step) < k.warmup;
        CHECK(s.messages == (v == 2 ? 1u : 3u));
        CHECK(s.overlapped == (v == 1 ? 2u : 0u));
        // Six segments' scalars in one all-reduce or in three; a warm-up step all-reduces the gradient.
        CHECK(s.bytes_sent ==
              (dense ? 4u * static_cast<std::uint64_t>(n) : 8u * 6u * static_cast<std::uint64_t>(width)));
      }
      CHECK(to_host(x[0]) == to_host(x[1]));
      if (comm.size() <= 2) CHECK(to_host(x[0]) == to_host(x[2]));
    }
    for (int v = 1; v < 3; ++v) {
      if (v == 2 && comm.size() > 2) continue;
      const auto s0 = ex[0]->state(), sv = ex[v]->state();
      REQUIRE(s0.size() == sv.size());
      for (std::size_t i = 0; i < s0.size(); ++i) CHECK(to_host(s0[i].view) == to_host(sv[i].view));
      const auto o0 = opt[0]->state(), ov = opt[v]->state();
      for (std::size_t i = 0; i < o0.size(); ++i) CHECK(to_host(o0[i].view) == to_host(ov[i].view));
      CHECK(opt[0]->steps() == opt[v]->steps());
    }
  }
}

TEST_CASE("A2SGD in buckets: a non-finite gradient in a late bucket stops every rank and changes nothing",
          "[a2sgd][buckets][errors]") {
  Communicator comm;
  ParameterStore store = fmnist_mlp_store();
  const auto n = static_cast<Index>(store.tensors().back().offset + store.tensors().back().size);
  const std::vector<GradientRange> order = mlp_backward_order(store);
  ExchangeConfig cfg;
  cfg.method = "a2sgd";
  cfg.layout = store.tensors();
  cfg.options["granularity"] = "layer";
  cfg.options["buckets"] = "on";
  cfg.common.buckets.first_bytes = 100000;
  cfg.common.buckets.bytes = 300000;
  auto ex = make_exchange(cfg, comm, n);
  ex->plan_buckets(order);
  Optimizer sgd(OptimizerConfig{}, n);
  auto x = to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  const ExecutionSpace exec;
  const auto gradient = [&](bool poisoned) {
    std::vector<float> g = random_gradient(static_cast<std::size_t>(n), 7u + static_cast<unsigned>(comm.rank()));
    // The middle bucket's first entry, on the last rank.
    if (poisoned && comm.rank() == comm.size() - 1)
      g[static_cast<std::size_t>(order[1].begin)] = std::numeric_limits<float>::quiet_NaN();
    return to_device(g);
  };
  auto g1 = gradient(false);
  if (GradientListener* l = ex->begin_step(g1, sgd))
    for (const GradientRange& group : order) l->gradient_ready(exec, group);
  ex->step(x, g1, sgd, 0.1);
  const auto x_before = to_host(x);
  auto g2 = gradient(true);
  GradientListener* listener = ex->begin_step(g2, sgd);
  REQUIRE(listener != nullptr);
  for (const GradientRange& group : order) listener->gradient_ready(exec, group);
  bool threw = false;
  try {
    ex->step(x, g2, sgd, 0.1);
  } catch (const NonFiniteError& err) {
    threw = true;
    CHECK_THAT(err.what(), A2SGD_CONTAINS(comm.rank() == comm.size() - 1 ? "1 non-finite" : "another rank"));
  }
  CHECK(threw);
  CHECK(to_host(x) == x_before);
}
