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
