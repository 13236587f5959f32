#include "MethodTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/compress/DenseExchange.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>

#include <a2sgd/core/Error.hpp>

#include <limits>
#include <random>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {
std::vector<float> rank_gradient(std::size_t n, int rank) {
  std::mt19937 rng(1234 + static_cast<unsigned>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (auto& v : g) v = normal(rng);
  return g;
}
}  // namespace

TEST_CASE("dense exchange applies the mean of the ranks' gradients", "[dense]") {
  Communicator comm;
  const std::size_t n = 5003;
  ExchangeConfig cfg;
  cfg.method = "dense";
  auto exchange = make_exchange(cfg, comm, static_cast<Index>(n));
  CHECK(exchange->name() == "dense");

  const auto g = rank_gradient(n, comm.rank());
  const auto all = allgather(g);
  auto x = to_device(std::vector<float>(n, 0.0f));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  exchange->step(x, to_device(g), sgd, 1.0);  // SGD with lr 1 from x = 0: x = -mean(g)

  const auto got = to_host(x);
  const int p = comm.size();
  // x = -fl(fl(1/p) fl(sum_r g_r)): p - 1 float additions in MPI's order, the conversion of 1/p
  // and the product: within gamma32(p + 1) sum_r |g_r| / p of the mean.
  for (std::size_t i = 0; i < n; ++i) {
    double mean = 0.0, abs_sum = 0.0;
    for (int r = 0; r < p; ++r) {
      mean += all[static_cast<std::size_t>(r) * n + i];
      abs_sum += std::abs(all[static_cast<std::size_t>(r) * n + i]);
    }
    mean /= p;
    CHECK_THAT(got[i], WithinAbs(-mean, gamma32(p + 1) * abs_sum / p));
  }
  // All replicas are identical after a dense step.
  const auto xs = allgather(got);
  for (int r = 1; r < p; ++r)
    CHECK(std::equal(xs.begin(), xs.begin() + static_cast<long>(n), xs.begin() + static_cast<long>(r * n)));

  const auto& s = exchange->stats();
  CHECK(s.last_step.bytes_sent == 4 * n);
  CHECK(s.last_step.messages == 1);
  CHECK(s.last_step.compress_s == 0.0);
  CHECK(s.steps == 1);
}

TEST_CASE("average_replicas writes the mean model and is accounted apart from training", "[dense]") {
  Communicator comm;
  const std::size_t n = 257;
  DenseExchange exchange(comm, static_cast<Index>(n));
  std::vector<float> mine(n);
  for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(comm.rank() * 10 + i % 3);
  auto x = to_device(mine);
  FloatView avg("avg", n);
  exchange.average_replicas(x, avg);
  const auto got = to_host(avg);
  const double p = comm.size();
  // Integer sums are exact in float; the scaling by fl(1/p) rounds twice (gamma32(2)).
  for (std::size_t i = 0; i < n; ++i) {
    const double mean = 10.0 * (p - 1) / 2.0 + i % 3;
    CHECK_THAT(got[i], WithinAbs(mean, gamma32(2) * mean));
  }
  CHECK(to_host(x) == mine);  // the replica itself is untouched
  CHECK(exchange.stats().averaging.bytes_sent == 4 * n);
  CHECK(exchange.stats().total.bytes_sent == 0);
}

TEST_CASE("a non-finite gradient on one rank stops every rank in a dense step", "[dense][errors]") {
  Communicator comm;
  const std::size_t n = 300;
  DenseExchange exchange(comm, static_cast<Index>(n));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  auto g = rank_gradient(n, comm.rank());
  if (comm.rank() == comm.size() - 1) g[7] = std::numeric_limits<float>::infinity();
  bool threw = false;
  try {
    exchange.step(x, to_device(g), sgd, 0.1);
  } catch (const NonFiniteError& e) {
    threw = true;
    CHECK_THAT(e.what(), A2SGD_CONTAINS("dense step 0") && A2SGD_CONTAINS("1 non-finite"));
  }
  CHECK(threw);
  CHECK(exchange.steps() == 0);
}

TEST_CASE("dense exchange hands MPI 4 n bytes per step (docs/methods.md)", "[dense][methods]") {
  const std::uint64_t n = 269322;  // the Fashion-MNIST MLP
  check_step_plan("dense", {}, {{4 * n}, CollectiveKind::allreduce, 1});
}

TEST_CASE("bucketed dense exchange: overlapped and not, bit for bit; within the bound of one all-reduce",
          "[dense][buckets]") {
  Communicator comm;
  const int p = comm.size();
  const std::size_t n = 5003;
  // The order a model would report (last groups first) and caps that make four buckets, the
  // first of 1,003 values (plan_buckets' own test).
  const std::vector<GradientRange> order = {{4000, 5003}, {3000, 4000}, {1000, 3000}, {0, 1000}};
  ExchangeConfig cfg;
  cfg.method = "dense";
  cfg.common.buckets.first_bytes = 1100 * sizeof(float);
  cfg.common.buckets.bytes = 2500 * sizeof(float);
  auto overlapped = make_exchange(cfg, comm, static_cast<Index>(n));
  overlapped->plan_buckets(order);
  REQUIRE(overlapped->buckets().size() == 4);
  cfg.common.buckets.overlap = false;
  auto after = make_exchange(cfg, comm, static_cast<Index>(n));
  after->plan_buckets(order);
  ExchangeConfig whole_cfg;
  whole_cfg.method = "dense";
  auto whole = make_exchange(whole_cfg, comm, static_cast<Index>(n));  // not planned: one bucket
  CHECK(whole->buckets().size() == 1);

  OptimizerConfig momentum;
  momentum.kind = OptimizerKind::momentum;
  Optimizer opt_a(momentum, static_cast<Index>(n)), opt_b(momentum, static_cast<Index>(n)),
      opt_c(momentum, static_cast<Index>(n));
  auto xa = to_device(std::vector<float>(n, 0.0f)), xb = to_device(std::vector<float>(n, 0.0f)),
       xc = to_device(std::vector<float>(n, 0.0f));
  const ExecutionSpace exec;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const auto g = rank_gradient(n, comm.rank() + 17 * step);
    // Overlapped: a bucket's all-reduce starts as the last of its groups is reported, except the
    // last bucket's (step() starts it).
    auto ga = to_device(g);
    GradientListener* listener = overlapped->begin_step(ga, opt_a);
    REQUIRE(listener != nullptr);
    for (const GradientRange& group : order) listener->gradient_ready(exec, group);
    overlapped->step(xa, ga, opt_a, 0.1);
    CHECK(overlapped->stats().last_step.overlapped == 3);
    CHECK(overlapped->stats().last_step.messages == 4);
    CHECK(overlapped->stats().last_step.bytes_sent == 4 * n);
    // Not overlapped: begin_step() arms nothing, step() runs the same four all-reduces.
    auto gb = to_device(g);
    CHECK(after->begin_step(gb, opt_b) == nullptr);
    after->step(xb, gb, opt_b, 0.1);
    CHECK(after->stats().last_step.overlapped == 0);
    CHECK(after->stats().last_step.messages == 4);
    auto gc = to_device(g);
    CHECK(whole->begin_step(gc, opt_c) == nullptr);
    whole->step(xc, gc, opt_c, 0.1);
    CHECK(whole->stats().last_step.messages == 1);
  }
  const auto a = to_host(xa), b = to_host(xb), c = to_host(xc);
  CHECK(a == b);
  // One all-reduce or four: each value's sum is the same p terms, added in an order MPI may pick
  // per message size; with at most 2 ranks there is one addition, so the results agree bit for
  // bit. Beyond, each step's mean is within gamma32(p + 1) of the exact one relative to sum |g|
  // (the first test's bound), and momentum's three steps add at most 0.1 * (1 + 1.9 + 2.71) times
  // that (velocity 0.9 v + u; x -= 0.1 v).
  if (p <= 2) {
    CHECK(a == c);
  } else {
    int bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double bound = 0.0;
      for (int step = 0; step < 3; ++step) {
        double abs_sum = 0.0;
        for (int r = 0; r < p; ++r) abs_sum += std::abs(rank_gradient(n, r + 17 * step)[i]);
        // Both results' errors, and 8 roundings of the optimizer's own operations on each.
        bound += 0.1 * (step == 0 ? 2.71 : step == 1 ? 1.9 : 1.0) * (2 * gamma32(p + 1) + 16 * u32) * abs_sum / p;
      }
      bad += std::abs(double(a[i]) - double(c[i])) > bound;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("bucketed dense exchange refuses reports outside the plan, a changed buffer or optimizer",
          "[dense][buckets]") {
  Communicator comm;
  const std::size_t n = 100;
  ExchangeConfig cfg;
  cfg.method = "dense";
  cfg.common.buckets.first_bytes = 40 * sizeof(float);
  cfg.common.buckets.bytes = 60 * sizeof(float);
  auto exchange = make_exchange(cfg, comm, static_cast<Index>(n));
  exchange->plan_buckets({{60, 100}, {0, 60}});
  REQUIRE(exchange->buckets().size() == 2);
  const ExecutionSpace exec;
  auto g = to_device(rank_gradient(n, comm.rank()));
  auto x = to_device(std::vector<float>(n, 0.0f));
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  GradientListener* listener = exchange->begin_step(g, sgd);
  REQUIRE(listener != nullptr);
  CHECK_THROWS_AS(listener->gradient_ready(exec, {50, 70}), InvalidArgument);
  CHECK_THROWS_WITH(listener->gradient_ready(exec, {50, 70}), A2SGD_CONTAINS("in no bucket"));
  CHECK_THROWS_AS(exchange->step(x, to_device(rank_gradient(n, 0)), sgd, 1.0), InvalidArgument);
  CHECK_THROWS_WITH(exchange->step(x, to_device(rank_gradient(n, 0)), sgd, 1.0),
                    A2SGD_CONTAINS("another gradient buffer"));
  Optimizer other(OptimizerConfig{}, static_cast<Index>(n));
  CHECK_THROWS_WITH(exchange->step(x, g, other, 1.0), A2SGD_CONTAINS("another optimizer"));
  // The refused calls started nothing: the step completes on every rank, as a plain one.
  exchange->step(x, g, sgd, 1.0);
  CHECK(exchange->stats().last_step.messages == 2);
  CHECK(exchange->stats().last_step.overlapped == 0);
}
