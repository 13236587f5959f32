#include "TestingCatch.hpp"

#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <map>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

// The formulas of docs/methods.md, written out independently of the implementations.
TEST_CASE("every method hands MPI the bytes per rank per step of docs/methods.md", "[methods]") {
  Communicator comm;
  ParameterStore store;  // the Fashion-MNIST MLP's shapes
  store.add("fc1.weight", {256, 784});
  store.add("fc1.bias", {256});
  store.add("fc2.weight", {256, 256});
  store.add("fc2.bias", {256});
  store.add("fc3.weight", {10, 256});
  store.add("fc3.bias", {10});
  const std::uint64_t n = static_cast<std::uint64_t>(store.tensors().back().offset + store.tensors().back().size);
  REQUIRE(n == 269322);
  const std::uint64_t k = std::llround(0.001 * n);  // topk / randomk ratio 0.001
  const std::uint64_t r = 2;
  const std::map<std::string, std::vector<std::uint64_t>> formula = {
      {"dense", {4 * n}},
      {"a2sgd", {16}},
      {"topk", {8 * k}},
      {"randomk", {4 * k}},
      {"qsgd", {4 + 4 * ceil_div(n * 10, 32)}},  // s = 256: 10 bits per entry
      {"efsign", {4 + 4 * ceil_div(n, 32)}},
      {"powersgd", {4 * (r * (256 + 256 + 10) + 256 + 256 + 10), 4 * r * (784 + 256 + 256)}},
      {"fp16", {2 * n}},
      {"bf16", {2 * n}},
  };
  REQUIRE(formula.size() == exchange_methods().size());
  Rng rng(1);
  std::vector<float> g(n);
  for (auto& v : g) v = static_cast<float>(0.01 * rng.normal());
  for (const auto& method : exchange_methods()) {
    INFO(method);
    ExchangeConfig cfg;
    cfg.method = method;
    cfg.layout = store.tensors();
    auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
    const auto& want = formula.at(method);
    const auto planned = ex->step_traffic();
    REQUIRE(planned.size() == want.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(planned[i].bytes == want[i]);
      total += want[i];
    }
    const bool gathers = method == "topk" || method == "qsgd" || method == "efsign";
    CHECK((planned[0].kind == CollectiveKind::allgather) == gathers);
    // MPI calls per step: one per collective, but two for the 16-bit all-reduce (all-to-all and
    // all-gather of the summed chunks), which the projection models as a ring all-reduce.
    const bool cast = method == "fp16" || method == "bf16";
    std::uint64_t calls = 0;
    for (const auto& c : planned) calls += static_cast<std::uint64_t>(c.mpi_calls);
    CHECK(calls == (cast ? 2u : want.size()));
    if (cast) CHECK(planned[0].algorithm == AllreduceModel::ring);
    Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
    auto x = to_device(std::vector<float>(n, 0.0f));
    for (int step = 0; step < 2; ++step) {
      ex->step(x, to_device(g), sgd, 0.01);
      CHECK(ex->stats().last_step.bytes_sent == total);
      CHECK(ex->stats().last_step.messages == calls);
    }
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

TEST_CASE("alpha-beta model: ring and recursive-doubling costs", "[methods][model]") {
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
  // Best: latency-bound messages take doubling, large ones the ring.
  CHECK(collective_seconds(CollectiveKind::allreduce, 16, 4096, link) ==
        collective_seconds(CollectiveKind::allreduce, 16, 4096, link, AllreduceModel::doubling));
  CHECK(collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link) ==
        collective_seconds(CollectiveKind::allreduce, 1 << 28, 4096, link, AllreduceModel::ring));
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
  CHECK_THROWS_WITH(parse_allreduce_model("tree"), A2SGD_CONTAINS("ring, doubling, best"));
}
