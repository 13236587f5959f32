#include "MethodTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <type_traits>

using namespace a2sgd;

// A method's step body runs only inside Exchange::step (checks, accounting): it takes a key that
// nobody else can make, neither by its constructor nor as an aggregate.
static_assert(!std::is_default_constructible_v<Exchange::StepKey>);
static_assert(!std::is_aggregate_v<Exchange::StepKey>);
using namespace a2sgd::testing;

// Every method in the registry, with its defaults on the MLP: the steps hand MPI exactly what
// step_traffic() plans, and the method declares its kernels' memory traffic. The formulas of
// docs/methods.md are each method's own test file's (check_step_plan, MethodTesting.hpp).
TEST_CASE("every registered method hands MPI the bytes and calls it plans", "[methods]") {
  Communicator comm;
  ParameterStore store = fmnist_mlp_store();
  const auto n = static_cast<Index>(store.tensors().back().offset + store.tensors().back().size);
  REQUIRE(n == 269322);
  Rng rng(1);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (auto& v : g) v = static_cast<float>(0.01 * rng.normal());
  REQUIRE(!exchange_registry().empty());
  for (const ExchangeMethod& method : exchange_registry()) {
    INFO(method.name);
    ExchangeConfig cfg;
    cfg.method = method.name;
    cfg.layout = store.tensors();
    auto ex = make_exchange(cfg, comm, n);
    CHECK(ex->name() == method.name);
    std::uint64_t total = 0, calls = 0;
    for (const auto& c : ex->step_traffic()) {
      CHECK(c.every == 1);  // the defaults: no periodic collective
      total += c.bytes;
      calls += static_cast<std::uint64_t>(c.mpi_calls);
    }
    Optimizer sgd(OptimizerConfig{}, n);
    auto x = to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
    for (int step = 0; step < 2; ++step) {
      ex->step(x, to_device(g), sgd, 0.01);
      CHECK(ex->stats().last_step.bytes_sent == total);
      CHECK(ex->stats().last_step.messages == calls);
    }
    const KernelTraffic t = method.kernel_traffic(static_cast<double>(n), static_cast<double>(total), comm.size());
    CHECK(t.apply.bytes() > 0.0);  // every method applies an update over n values
  }
}

TEST_CASE("A2SGD's planned traffic includes periodic averaging, amortised", "[methods][model]") {
  Communicator comm;
  A2sgdOptions o;
  o.average_every = 100;
  A2sgdExchange ex(comm, 1000, o);
  const auto t = ex.step_traffic();
  REQUIRE(t.size() == 2);
  CHECK(t[0].bytes == 16);
  CHECK(t[0].every == 1);
  CHECK(t[1].bytes == 4000);
  CHECK(t[1].every == 100);
  // Over K steps the accounting agrees: K steps of 16 bytes and one average of 4 n.
  Optimizer sgd(OptimizerConfig{}, 1000);
  auto x = to_device(std::vector<float>(1000, 0.0f));
  Rng rng(3);
  std::vector<float> g(1000);
  for (int s = 0; s < 100; ++s) {
    for (auto& v : g) v = static_cast<float>(rng.normal());
    ex.step(x, to_device(g), sgd, 0.01);
  }
  CHECK(ex.stats().total.bytes_sent == 100 * 16 + 4000);
}

TEST_CASE("alpha-beta model: ring, recursive-doubling and halving-doubling costs", "[methods][model]") {
  // The model's costs are double formulas of a few operations: within gamma64(8) of the closed forms.
  Link link;
  link.alpha_s = 1e-6;
  link.bytes_per_s = 1e9;
  // p = 1: nothing to send.
  CHECK(collective_seconds(CollectiveKind::allreduce, 1000, 1, link) == 0.0);
  // Ring at p = 4, m = 4e6 bytes: 2*3 alpha + 2*(3/4)*m/B.
  CHECK_THAT(collective_seconds(CollectiveKind::allreduce, 4000000, 4, link, AllreduceModel::ring),
             WithinRel(6e-6 + 6e-3, gamma64(8)));
  // Recursive doubling at p = 4: 2 (alpha + m/B).
  CHECK_THAT(collective_seconds(CollectiveKind::allreduce, 16, 4, link, AllreduceModel::doubling),
             WithinRel(2 * (1e-6 + 16e-9), gamma64(8)));
  // Halving-doubling (Rabenseifner) at p = 8: 2*3 alpha + 2*(7/8)*m/B; at p = 2 it is the ring.
  CHECK_THAT(collective_seconds(CollectiveKind::allreduce, 4000000, 8, link, AllreduceModel::halving),
             WithinRel(6e-6 + 7e-3, gamma64(8)));
  CHECK_THAT(
      collective_seconds(CollectiveKind::allreduce, 4000000, 2, link, AllreduceModel::halving),
      WithinRel(collective_seconds(CollectiveKind::allreduce, 4000000, 2, link, AllreduceModel::ring), gamma64(8)));
  // At p = 6 the largest power of two is 4: 2*2 alpha + 2*(3/4)*m/B, plus 2 (alpha + m/B) for the
  // two ranks that fold in and out.
  CHECK_THAT(collective_seconds(CollectiveKind::allreduce, 4000000, 6, link, AllreduceModel::halving),
             WithinRel(4e-6 + 6e-3 + 2 * (1e-6 + 4e-3), gamma64(8)));
  // Best: latency-bound messages take doubling, large ones a bandwidth-optimal algorithm; at large
  // p that is halving-doubling, whose log2 p latencies undercut the ring's 2 (p - 1).
  CHECK(collective_seconds(CollectiveKind::allreduce, 16, 4096, link) ==
        collective_seconds(CollectiveKind::allreduce, 16, 4096, link, AllreduceModel::doubling));
  CHECK(collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link) ==
        collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link, AllreduceModel::halving));
  CHECK(collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link, AllreduceModel::halving) <
        collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link, AllreduceModel::ring));
  // Never worse than the ring at a power of two (the same volume, fewer latencies).
  for (int p = 2; p <= 1 << 20; p *= 2)
    CHECK(collective_seconds(CollectiveKind::allreduce, 1 << 24, p, link, AllreduceModel::halving) <=
          collective_seconds(CollectiveKind::allreduce, 1 << 24, p, link, AllreduceModel::ring) * (1 + gamma64(8)));
  // Non-power-of-two p rounds the doubling rounds up.
  CHECK_THAT(collective_seconds(CollectiveKind::allgather, 100, 5, link), WithinRel(3e-6 + 4 * 100e-9, gamma64(8)));
  // The all-gather's volume grows with p, the ring all-reduce's does not.
  const double g1 = collective_seconds(CollectiveKind::allgather, 1 << 20, 1024, link);
  const double g2 = collective_seconds(CollectiveKind::allgather, 1 << 20, 2048, link);
  CHECK(g2 > 1.9 * g1);
  CHECK(step_comm_seconds({{CollectiveKind::allreduce, 16}, {CollectiveKind::allgather, 100}}, 5, link) ==
        collective_seconds(CollectiveKind::allreduce, 16, 5, link) +
            collective_seconds(CollectiveKind::allgather, 100, 5, link));

  const Link l = Link::parse("100:1.5", 2e-6);
  CHECK_THAT(l.bytes_per_s, WithinRel(12.5e9, gamma64(8)));
  CHECK_THAT(l.alpha_s, WithinRel(1.5e-6, gamma64(8)));
  CHECK_THAT(Link::parse("10", 5e-6).alpha_s, WithinRel(5e-6, gamma64(8)));
  CHECK_THROWS_WITH(Link::parse("fast", 1e-6), A2SGD_CONTAINS("link \"fast\""));
  CHECK_THROWS_AS(Link::parse("10:-1", 1e-6), InvalidArgument);
  CHECK_THROWS_AS(Link::parse("0", 1e-6), InvalidArgument);
  // Half duplex: the bandwidth terms double, the latency terms stay.
  const Link h = Link::parse("100:1.5:half", 2e-6);
  CHECK_FALSE(h.full_duplex);
  CHECK(Link::parse("100:1.5", 2e-6).full_duplex);
  CHECK_THAT(collective_seconds(CollectiveKind::allreduce, 4000000, 4, h, AllreduceModel::ring),
             WithinRel(6 * 1.5e-6 + 2 * 6e6 / 12.5e9, gamma64(8)));
  CHECK_THAT(collective_seconds(CollectiveKind::allgather, 100, 5, h),
             WithinRel(3 * 1.5e-6 + 2 * 400 / 12.5e9, gamma64(8)));
  CHECK_THROWS_AS(Link::parse("half", 1e-6), InvalidArgument);
  // A collective made every K steps counts 1 / K per step.
  PlannedCollective every{CollectiveKind::allreduce, 1 << 20};
  every.every = 50;
  CHECK_THAT(step_comm_seconds({{CollectiveKind::allreduce, 16}, every}, 4, link),
             WithinRel(collective_seconds(CollectiveKind::allreduce, 16, 4, link) +
                           collective_seconds(CollectiveKind::allreduce, 1 << 20, 4, link) / 50,
                       gamma64(8)));
  CHECK(parse_allreduce_model("ring") == AllreduceModel::ring);
  CHECK(parse_allreduce_model("halving") == AllreduceModel::halving);
  CHECK_THROWS_WITH(parse_allreduce_model("tree"), A2SGD_CONTAINS("ring, doubling, halving, best"));
}

TEST_CASE("every bucketed method: overlapped and not, bit for bit; each bucket's planned bytes", "[methods][buckets]") {
  Communicator comm;
  ParameterStore store = fmnist_mlp_store();
  const auto n = static_cast<Index>(store.tensors().back().offset + store.tensors().back().size);
  // The MLP's layers as its backward pass reports them, last first; caps that make three buckets
  // (fc3: 10 kB; fc2: 263 kB; fc1: 803 kB, above the 300 kB cap, a bucket of its own).
  const std::vector<GradientRange> order = mlp_backward_order(store);
  const std::vector<std::string> bucketed = {"dense", "topk", "randomk", "qsgd", "efsign", "powersgd", "fp16", "bf16"};
  const ExecutionSpace exec;
  for (const ExchangeMethod& method : exchange_registry()) {
    INFO(method.name);
    std::unique_ptr<Exchange> ex[2];
    for (int overlap = 0; overlap < 2; ++overlap) {
      ExchangeConfig cfg;
      cfg.method = method.name;
      cfg.layout = store.tensors();
      cfg.common.buckets.first_bytes = 100000;
      cfg.common.buckets.bytes = 300000;
      cfg.common.buckets.overlap = overlap == 1;
      ex[overlap] = make_exchange(cfg, comm, n);
      ex[overlap]->plan_buckets(order);
    }
    const bool buckets = std::find(bucketed.begin(), bucketed.end(), method.name) != bucketed.end();
    CHECK(ex[1]->buckets().size() == (buckets ? 3u : 1u));
    std::uint64_t total = 0, calls = 0;
    for (const auto& c : ex[1]->step_traffic()) {
      total += c.bytes;
      calls += static_cast<std::uint64_t>(c.mpi_calls);
    }
    Optimizer opt[2] = {Optimizer(OptimizerConfig{}, n), Optimizer(OptimizerConfig{}, n)};
    FloatView x[2] = {to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f)),
                      to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f))};
    for (int step = 0; step < 3; ++step) {
      Rng rng(100 * static_cast<std::uint64_t>(step) + static_cast<std::uint64_t>(comm.rank()));
      std::vector<float> g(static_cast<std::size_t>(n));
      for (auto& v : g) v = static_cast<float>(0.01 * rng.normal());
      for (int overlap = 0; overlap < 2; ++overlap) {
        auto grad = to_device(g);
        GradientListener* listener = ex[overlap]->begin_step(grad, opt[overlap]);
        CHECK((listener != nullptr) == (buckets && overlap == 1));
        if (listener)
          for (const GradientRange& group : order) listener->gradient_ready(exec, group);
        ex[overlap]->step(x[overlap], grad, opt[overlap], 0.01);
        const StepStats& s = ex[overlap]->stats().last_step;
        CHECK(s.bytes_sent == total);
        CHECK(s.messages == calls);
        CHECK(s.overlapped == (listener ? 2u : 0u));
      }
    }
    CHECK(to_host(x[0]) == to_host(x[1]));
    const auto state0 = ex[0]->state(), state1 = ex[1]->state();
    REQUIRE(state0.size() == state1.size());
    for (std::size_t i = 0; i < state0.size(); ++i) CHECK(to_host(state0[i].view) == to_host(state1[i].view));
  }
}
