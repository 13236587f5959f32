#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/compress/PowerSgdExchange.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

std::vector<TensorInfo> layout() {
  ParameterStore store;
  store.add("w1", {40, 30});
  store.add("b1", {7});
  store.add("w2", {16, 4, 16});  // seen as a 16 x 64 matrix
  store.add("small", {2, 2});    // r (2 + 2) >= 4 for r >= 1: exchanged dense
  return store.tensors();
}

// U V^T with U shared by all ranks (seed) and V per rank: the ranks' mean has rank <= r.
void low_rank(std::vector<float>& g, Index offset, Index rows, Index cols, int r, std::uint64_t rank_seed) {
  Rng shared(42), mine(rank_seed);
  std::vector<double> u(rows * r), v(cols * r);
  for (auto& x : u) x = shared.normal();
  for (auto& x : v) x = mine.normal();
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int c = 0; c < r; ++c) s += u[i * r + c] * v[j * r + c];
      g[offset + i * cols + j] = static_cast<float>(s);
    }
}

}  // namespace

TEST_CASE("PowerSGD splits the layout into compressed matrices and dense tensors; bytes per step", "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  PowerSgdOptions o;
  o.rank = 2;
  PowerSgdExchange ex(comm, lay, o);
  const Index n = ex.size();
  CHECK(n == 40 * 30 + 7 + 16 * 64 + 4);
  REQUIRE(ex.blocks().size() == 2);
  CHECK(ex.blocks()[1].rows == 16);
  CHECK(ex.blocks()[1].cols == 64);
  REQUIRE(ex.dense_slices().size() == 2);
  CHECK(ex.p_payload() == 40 * 2 + 16 * 2 + 7 + 4);
  CHECK(ex.q_payload() == 30 * 2 + 64 * 2);
  Optimizer sgd(OptimizerConfig{}, n);
  auto x = to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  Rng rng(3);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (auto& v : g) v = static_cast<float>(rng.normal());
  ex.step(x, to_device(g), sgd, 0.1);
  CHECK(ex.stats().last_step.bytes_sent == 4u * (40 * 2 + 16 * 2 + 7 + 4 + 30 * 2 + 64 * 2));
  CHECK(ex.stats().last_step.messages == 2);
  const auto st = ex.state();
  REQUIRE(st.size() == 2);
  CHECK(st[0].name == "residual");
  CHECK(st[0].view.extent(0) == static_cast<std::size_t>(n));
  CHECK(st[1].name == "powersgd_q");
  CHECK(st[1].merge == StateMerge::mean);

  CHECK_THROWS_WITH(PowerSgdExchange(comm, {}, o), A2SGD_CONTAINS("needs the model's tensor layout"));
  auto gap = lay;
  gap[1].offset += 1;
  CHECK_THROWS_WITH(PowerSgdExchange(comm, gap, o), A2SGD_CONTAINS("b1"));
  o.rank = 0;
  CHECK_THROWS_WITH(PowerSgdExchange(comm, lay, o), A2SGD_CONTAINS("rank 0"));
  ExchangeConfig cfg;
  cfg.method = "powersgd";
  cfg.layout = lay;
  CHECK_THROWS_WITH(make_exchange(cfg, comm, n + 1), A2SGD_CONTAINS("not n ="));
}

TEST_CASE("PowerSGD reproduces a rank-r mean gradient exactly; the residuals sum to zero", "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  for (int r : {1, 2}) {
    INFO("rank " << r);
    PowerSgdOptions o;
    o.rank = r;
    PowerSgdExchange ex(comm, lay, o);
    const auto n = static_cast<std::size_t>(ex.size());
    Optimizer sgd(OptimizerConfig{}, ex.size());
    auto x = to_device(std::vector<float>(n, 0.0f));
    std::vector<float> x_prev(n, 0.0f);
    for (int step = 0; step < 3; ++step) {  // later steps start from the warm Q
      std::vector<float> g(n);
      Rng rng(100u * step + static_cast<unsigned>(comm.rank()));
      for (auto& v : g) v = static_cast<float>(rng.normal());
      const std::uint64_t seed = 7u * step + static_cast<unsigned>(comm.rank()) + 1;
      low_rank(g, 0, 40, 30, r, seed);
      low_rank(g, 1207, 16, 64, r, seed + 1000);
      const auto all = allgather(g);
      ex.step(x, to_device(g), sgd, 1.0);
      const auto xs = to_host(x), e_all = allgather(to_host(ex.residual()));
      double worst = 0.0, worst_e = 0.0, scale = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        double mean = 0.0, e_sum = 0.0;
        for (int q = 0; q < comm.size(); ++q) mean += all[q * n + i], e_sum += e_all[q * n + i];
        mean /= comm.size();
        // Float rounding grows with the ranks' own values, larger than their mean.
        for (int q = 0; q < comm.size(); ++q)
          scale = std::max(scale, std::abs(double(all[q * n + i])) + std::abs(double(e_all[q * n + i])));
        worst = std::max(worst, std::abs((x_prev[i] - xs[i]) - mean));
        // Each rank keeps M_r - mean(M); nothing is lost overall.
        worst_e = std::max(worst_e, std::abs(e_sum));
      }
      CHECK(worst <= 1e-4 * scale);
      CHECK(worst_e <= 1e-4 * scale * comm.size());  // p rounding errors of u add up
      x_prev = xs;
    }
  }
}

TEST_CASE("PowerSGD error feedback: e_new = g + e_old - u on matrices, 0 on dense tensors", "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  PowerSgdExchange ex(comm, lay);
  const auto n = static_cast<std::size_t>(ex.size());
  Optimizer sgd(OptimizerConfig{}, ex.size());
  auto x = to_device(std::vector<float>(n, 0.0f));
  std::vector<float> x_prev(n, 0.0f), e_old(n, 0.0f);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(n);
    Rng rng(500u * step + static_cast<unsigned>(comm.rank()));
    for (auto& v : g) v = static_cast<float>(rng.normal());
    ex.step(x, to_device(g), sgd, 1.0);
    const auto xs = to_host(x), e = to_host(ex.residual());
    int wrong = 0, dense_left = 0;
    double residual_norm = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double u = double(x_prev[i]) - xs[i];
      const bool dense = (i >= 1200 && i < 1207) || i >= 1207 + 1024;
      if (dense) {
        dense_left += e[i] != 0.0f;
      } else {
        wrong += std::abs(double(e[i]) + u - (double(g[i]) + e_old[i])) > 1e-5 * (1.0 + std::abs(g[i] + e_old[i]));
        residual_norm += double(e[i]) * e[i];
      }
    }
    CHECK(wrong == 0);
    CHECK(dense_left == 0);
    CHECK(residual_norm > 1.0);  // full-rank noise: rank 2 cannot carry it, the rest is fed back
    x_prev = xs;
    e_old = e;
  }
}
