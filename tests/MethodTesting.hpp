#pragma once
// A method's planned traffic (Exchange::step_traffic) against the formulas of docs/methods.md,
// written out independently of the implementation by each method's own test file, and against
// what its steps hand to MPI (stats().last_step).
#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/GradientListener.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>

#include <map>
#include <string>
#include <vector>

namespace a2sgd::testing {

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

/// The Fashion-MNIST MLP's tensors (784-256-256-10): n = 269322.
inline ParameterStore fmnist_mlp_store() {
  ParameterStore store;
  store.add("fc1.weight", {256, 784});
  store.add("fc1.bias", {256});
  store.add("fc2.weight", {256, 256});
  store.add("fc2.bias", {256});
  store.add("fc3.weight", {10, 256});
  store.add("fc3.bias", {10});
  return store;
}

/// The MLP's layers as its backward pass reports them (weight and bias together, last layer first).
inline std::vector<GradientRange> mlp_backward_order(const ParameterStore& store) {
  std::vector<GradientRange> order;
  const auto& t = store.tensors();
  for (std::size_t i = t.size(); i >= 2; i -= 2) order.push_back({t[i - 2].offset, t[i - 1].offset + t[i - 1].size});
  return order;
}

/// What one regular step of a method must plan and send: the bytes of each collective, the kind
/// of the first, and the MPI calls in all.
struct StepPlan {
  std::vector<std::uint64_t> bytes;
  CollectiveKind first_kind = CollectiveKind::allreduce;
  std::uint64_t mpi_calls = 0;
  AllreduceModel first_algorithm = AllreduceModel::best;  ///< the model of the first collective
};

/// Builds `method` with `options` on the MLP's layout, checks step_traffic() against `want`, then
/// runs two steps and checks that each hands MPI exactly the planned bytes in the planned calls.
inline void check_step_plan(const std::string& method, const std::map<std::string, std::string>& options,
                            const StepPlan& want) {
  INFO(method);
  Communicator comm;
  ParameterStore store = fmnist_mlp_store();
  const auto n = static_cast<std::uint64_t>(store.tensors().back().offset + store.tensors().back().size);
  ExchangeConfig cfg;
  cfg.method = method;
  cfg.options = options;
  cfg.layout = store.tensors();
  auto ex = make_exchange(cfg, comm, static_cast<Index>(n));
  const auto planned = ex->step_traffic();
  REQUIRE(planned.size() == want.bytes.size());
  std::uint64_t total = 0, calls = 0;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    CHECK(planned[i].bytes == want.bytes[i]);
    total += want.bytes[i];
    calls += static_cast<std::uint64_t>(planned[i].mpi_calls);
  }
  CHECK(planned[0].kind == want.first_kind);
  CHECK(planned[0].algorithm == want.first_algorithm);
  CHECK(calls == want.mpi_calls);
  Rng rng(1);
  std::vector<float> g(n);
  for (auto& v : g) v = static_cast<float>(0.01 * rng.normal());
  Optimizer sgd(OptimizerConfig{}, static_cast<Index>(n));
  auto x = to_device(std::vector<float>(n, 0.0f));
  for (int step = 0; step < 2; ++step) {
    ex->step(x, to_device(g), sgd, 0.01);
    CHECK(ex->stats().last_step.bytes_sent == total);
    CHECK(ex->stats().last_step.messages == calls);
  }
}

}  // namespace a2sgd::testing
