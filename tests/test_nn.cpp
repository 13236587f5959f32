#include "TestingCatch.hpp"

#include <a2sgd/core/Random.hpp>
#include <a2sgd/nn/Mlp.hpp>

#include <cmath>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

Matrix random_matrix(Index rows, Index cols, std::uint64_t seed) {
  Matrix m("m", static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  auto h = Kokkos::create_mirror_view(m);
  Rng rng(seed);
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < cols; ++c) h(r, c) = static_cast<float>(rng.normal());
  Kokkos::deep_copy(m, h);
  return m;
}

LabelView make_labels(const std::vector<int>& values) {
  LabelView v("labels", values.size());
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < values.size(); ++i) h(i) = values[i];
  Kokkos::deep_copy(v, h);
  return v;
}

}  // namespace

TEST_CASE("MLP gradients match central finite differences", "[nn]") {
  const ExecutionSpace exec;
  ParameterStore store;
  nn::Mlp mlp(nn::MlpConfig{6, {5, 4}, 3}, store);
  store.allocate();
  mlp.reserve(4);
  CHECK(mlp.describe() == "mlp 6-5-4-3");
  CHECK(store.size() == 5 * 6 + 5 + 4 * 5 + 4 + 3 * 4 + 3);
  mlp.initialize(store.params(), 42, nn::InitScheme::xavier);
  // Biases away from zero so that ReLU kinks are unlikely to sit within the finite-difference step.
  {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
    Rng rng(3);
    for (Index i = 0; i < store.size(); ++i) h(i) += static_cast<float>(0.1 * rng.normal());
    Kokkos::deep_copy(store.params(), h);
  }
  const Matrix x = random_matrix(4, 6, 7);
  const LabelView y = make_labels({0, 2, 1, 2});

  const nn::LossResult r = mlp.forward_backward(exec, store.params(), store.grads(), x, y);
  CHECK(std::isfinite(r.loss_sum));
  const auto analytic = to_host(store.grads());
  auto params = to_host(store.params());
  const double h = 1e-2;
  int bad = 0;
  for (Index i = 0; i < store.size(); ++i) {
    const float saved = params[i];
    auto loss_at = [&](double v) {
      params[i] = static_cast<float>(v);
      Kokkos::deep_copy(store.params(), Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                                            params.data(), params.size()));
      return mlp.evaluate(exec, store.params(), x, y).loss_sum / 4.0;
    };
    const double numeric = (loss_at(saved + h) - loss_at(saved - h)) / (2 * h);
    params[i] = saved;
    if (std::abs(numeric - analytic[i]) > 2e-3 + 2e-2 * std::abs(numeric)) {
      ++bad;
      UNSCOPED_INFO("parameter " << i << ": analytic " << analytic[i] << ", numeric " << numeric);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("softmax cross-entropy: loss, accuracy and gradient on known logits", "[nn]") {
  Matrix z("z", 2, 3);
  auto h = Kokkos::create_mirror_view(z);
  h(0, 0) = 1, h(0, 1) = 2, h(0, 2) = 3;
  h(1, 0) = 1000, h(1, 1) = 0, h(1, 2) = -1000;  // overflow-safe
  Kokkos::deep_copy(z, h);
  Matrix dz("dz", 2, 3);
  const auto r = nn::softmax_cross_entropy(ExecutionSpace(), z, make_labels({0, 0}), dz, 0.5f);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK_THAT(r.loss_sum, WithinAbs(lse - 1.0 + 0.0, 1e-5));
  CHECK(r.correct == 1);
  auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dz);
  CHECK_THAT(g(0, 0), WithinAbs(0.5 * (std::exp(1.0 - lse) - 1.0), 1e-6));
  CHECK_THAT(g(0, 2), WithinAbs(0.5 * std::exp(3.0 - lse), 1e-6));
  CHECK_THAT(g(1, 0), WithinAbs(0.0, 1e-6));
}

TEST_CASE("initialisation is deterministic, seed-dependent and scaled by fan-in", "[nn]") {
  ParameterStore a, b;
  nn::Mlp ma(nn::MlpConfig{784, {256}, 10}, a), mb(nn::MlpConfig{784, {256}, 10}, b);
  a.allocate();
  b.allocate();
  ma.initialize(a.params(), 5, nn::InitScheme::he);
  mb.initialize(b.params(), 5, nn::InitScheme::he);
  const auto xa = to_host(a.params());
  CHECK(xa == to_host(b.params()));
  mb.initialize(b.params(), 6, nn::InitScheme::he);
  CHECK(xa != to_host(b.params()));
  // He: the first layer's weights have variance 2 / 784; biases are zero.
  const auto& w = a.info("fc1.weight");
  double s2 = 0;
  for (Index i = 0; i < w.size; ++i) s2 += double(xa[w.offset + i]) * xa[w.offset + i];
  CHECK_THAT(s2 / w.size, WithinRel(2.0 / 784, 0.02));
  for (Index i = 0; i < 256; ++i) CHECK(xa[a.info("fc1.bias").offset + i] == 0.0f);
  CHECK_THROWS_WITH(nn::parse_init_scheme("kaiming"), A2SGD_CONTAINS("he, xavier"));
}
