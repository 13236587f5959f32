// UpdateMonitor (the Trainer's --diagnostics-every): per-tensor update norms against the mean
// gradient, the entries without gradient that moved, and per-tensor replica divergence, checked
// against host computations from every rank's gradients and parameters.
#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/train/UpdateMonitor.hpp>

#include <cmath>
#include <random>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

// Two tensors; the first has rows of exactly zero gradient: rows 0-9 on every rank, and rows
// 10 + rank on this rank only (as an embedding's absent words).
std::vector<TensorInfo> layout() {
  return {{"emb", {40, 25}, 0, 1000}, {"fc", {7}, 1000, 7}};
}

std::vector<float> gradient(int rank, unsigned seed) {
  std::mt19937 rng(seed + 31u * static_cast<unsigned>(rank));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(1007);
  for (auto& v : g) v = normal(rng);
  for (std::size_t i = 0; i < 250; ++i) g[i] = 0.0f;
  for (std::size_t i = 0; i < 25; ++i) g[static_cast<std::size_t>(10 + rank) * 25 + i] = 0.0f;
  return g;
}

}  // namespace

TEST_CASE("the update monitor measures dense SGD's update as the mean gradient", "[monitor]") {
  Communicator comm;
  const auto tensors = layout();
  train::UpdateMonitor monitor(comm, tensors, 1007);
  ExchangeConfig cfg;
  cfg.method = "dense";
  auto exchange = make_exchange(cfg, comm, 1007);
  Optimizer sgd(OptimizerConfig{}, 1007);
  auto x = to_device(std::vector<float>(1007, 0.0f));
  const auto g = gradient(comm.rank(), 5);
  auto grads = to_device(g);
  monitor.before_step(x, grads);
  exchange->step(x, grads, sgd, 1.0);
  const auto stats = monitor.after_step(x, 1.0);
  REQUIRE(stats.size() == 2);

  // Host: the mean gradient, and which of this rank's zero entries have a non-zero mean.
  const auto all = allgather(g);
  const std::size_t p = static_cast<std::size_t>(comm.size());
  double zeros = 0, moved = 0;
  std::vector<double> mean2(2, 0.0);
  for (std::size_t r = 0; r < p; ++r)
    for (std::size_t i = 0; i < 1007; ++i) {
      double sum = 0;
      for (std::size_t q = 0; q < p; ++q) sum += all[q * 1007 + i];
      if (r == 0) mean2[i < 1000 ? 0 : 1] += (sum / double(p)) * (sum / double(p));
      if (all[r * 1007 + i] == 0.0f) zeros += 1, moved += sum != 0.0;
    }
  // Dense SGD from x = 0 with lr 1 moves x to -fl(mean): the ratio is 1 up to the float sum of p
  // terms and the scaling (gamma32(p) + 2 u32 per entry), as is the mean gradient's norm.
  const double tol = gamma32(double(p)) + 4 * u32;
  for (std::size_t k = 0; k < 2; ++k) {
    INFO("tensor " << tensors[k].name);
    CHECK_THAT(stats[k].mean_grad_norm, WithinRel(std::sqrt(mean2[k]), tol));
    CHECK_THAT(stats[k].update_norm / stats[k].mean_grad_norm, WithinAbs(1.0, 2 * tol));
  }
  CHECK(stats[0].zero_fraction == zeros / double(p * 1000));
  CHECK(stats[0].zero_moved == moved / zeros);
  CHECK(stats[1].zero_fraction == 0.0);
  CHECK(stats[0].zero_update_share >= 0.0);
  if (comm.size() == 1) CHECK(stats[0].zero_moved == 0.0);
}

TEST_CASE("the update monitor sees A2SGD move entries without gradient, and hold them with hold", "[monitor]") {
  Communicator comm;
  const auto tensors = layout();
  for (ZeroGradient zeros : {ZeroGradient::move, ZeroGradient::hold}) {
    INFO("zero gradient " << to_string(zeros));
    train::UpdateMonitor monitor(comm, tensors, 1007);
    A2sgdOptions o;
    o.zero_gradient = zeros;
    A2sgdExchange exchange(comm, 1007, o);
    Optimizer sgd(OptimizerConfig{}, 1007);
    auto x = to_device(std::vector<float>(1007, 0.0f));
    // A full gradient first, so that every entry carries a residual into the monitored step.
    std::vector<float> full(1007, 0.0f);
    std::mt19937 rng(77u + static_cast<unsigned>(comm.rank()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : full) v = normal(rng);
    exchange.step(x, to_device(full), sgd, 0.1);
    auto grads = to_device(gradient(comm.rank(), 9));
    monitor.before_step(x, grads);
    exchange.step(x, grads, sgd, 0.1);
    const auto stats = monitor.after_step(x, 0.1);
    if (zeros == ZeroGradient::hold) {
      CHECK(stats[0].zero_moved == 0.0);
      CHECK(stats[0].zero_update_share == 0.0);
    } else {
      CHECK(stats[0].zero_moved > 0.9);
      CHECK(stats[0].zero_update_share > 0.0);
    }
    // Per-tensor divergence against a host computation of max_r ||x_r - avg|| / ||avg||.
    FloatView averaged("averaged", 1007);
    exchange.average_replicas(x, averaged);
    const auto div = monitor.divergence(x, averaged);
    const auto xs = allgather(to_host(x));
    const auto avg = to_host(averaged);
    for (std::size_t k = 0; k < 2; ++k) {
      double worst = 0.0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) {
        double d = 0, n = 0;
        for (Index i = tensors[k].offset; i < tensors[k].offset + tensors[k].size; ++i) {
          const double diff = double(xs[r * 1007 + static_cast<std::size_t>(i)]) - avg[static_cast<std::size_t>(i)];
          d += diff * diff;
          n += double(avg[static_cast<std::size_t>(i)]) * avg[static_cast<std::size_t>(i)];
        }
        worst = std::max(worst, std::sqrt(d / n));
      }
      CHECK_THAT(div[k], WithinAbs(worst, 1e-12 + 4 * gamma64(1000) * worst));
      if (comm.size() == 1) CHECK(div[k] == 0.0);
    }
  }
}
