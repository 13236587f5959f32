#include "GradientRecorder.hpp"
#include "RoundingBounds.hpp"

#include <a2sgd/compress/GradientBuckets.hpp>
#include <a2sgd/core/Math.hpp>
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

// A double reference of the MLP's forward and backward passes that carries the rounding bound of
// the library's float32 computation (RoundingBounds.hpp): every GEMM entry a dot product in any
// order, bias and ReLU element-wise, softmax with float exp and a double denominator, bias
// gradients summed in double. Also returns the mean loss in double and, for each ReLU input, how
// far it is from the kink beyond its own error (the float and the reference masks agree when > 0).
struct MlpReference {
  std::vector<Rounded> grads;
  double loss = 0.0;
  double loss_err = 0.0;  // bound on |library's mean loss - loss|
  double kink_margin = 1e300;
  std::vector<bool> mask;  // which ReLU inputs are positive
};

MlpReference mlp_reference(const ParameterStore& store, const std::vector<double>& params, const std::vector<float>& x,
                           Index batch, const std::vector<Index>& widths, const std::vector<int>& labels) {
  const std::size_t layers = widths.size() - 1;
  MlpReference ref;
  ref.grads.assign(params.size(), Rounded{});
  // act[l]: batch x widths[l] inputs of layer l (act[0] = x, exact floats).
  std::vector<std::vector<Rounded>> act(layers + 1);
  for (float v : x) act[0].push_back(exact(v));
  auto weight = [&](std::size_t l, Index i, Index k) {
    return exact(params[store.info("fc" + std::to_string(l + 1) + ".weight").offset + i * widths[l] + k]);
  };
  auto bias = [&](std::size_t l, Index i) {
    return exact(params[store.info("fc" + std::to_string(l + 1) + ".bias").offset + i]);
  };
  for (std::size_t l = 0; l < layers; ++l) {
    const Index in = widths[l], out = widths[l + 1];
    act[l + 1].resize(static_cast<std::size_t>(batch * out));
    for (Index b = 0; b < batch; ++b)
      for (Index i = 0; i < out; ++i) {
        Rounded z =
            dot([&](std::size_t k) { return act[l][b * in + k]; },
                [&](std::size_t k) { return weight(l, i, static_cast<Index>(k)); }, static_cast<std::size_t>(in)) +
            bias(l, i);
        if (l + 1 < layers) {
          ref.kink_margin = std::min(ref.kink_margin, std::abs(z.v) - z.e);
          ref.mask.push_back(z.v > 0);
          if (z.v < 0) z = exact(0.0);
        }
        act[l + 1][b * out + i] = z;
      }
  }
  // Softmax cross-entropy: dz = (exp(z - zmax) fl(1 / sum) - onehot) fl(1 / batch).
  const Index classes = widths.back();
  std::vector<Rounded> dz(static_cast<std::size_t>(batch * classes));
  const Rounded scale = rounded(1.0 / double(batch), 0.0);
  for (Index b = 0; b < batch; ++b) {
    const Rounded* z = &act[layers][b * classes];
    Index arg = 0;
    for (Index c = 1; c < classes; ++c)
      if (z[c].v > z[arg].v) arg = c;
    std::vector<Rounded> ex;
    for (Index c = 0; c < classes; ++c) ex.push_back(exp32(z[c] - z[arg]));
    Rounded sum{0.0, 0.0};
    for (const auto& e : ex) sum.v += e.v, sum.e += e.e + gamma64(double(classes)) * e.v;
    const Rounded inv = rounded(1.0 / sum.v, sum.e / (sum.v * (sum.v - sum.e)));
    const Rounded shifted = z[labels[b]] - z[arg];
    ref.loss += (std::log(sum.v) - shifted.v) / double(batch);
    ref.loss_err +=
        (sum.e / (sum.v - sum.e) + shifted.e + gamma64(4) * (std::abs(std::log(sum.v)) + std::abs(shifted.v))) /
        double(batch);
    for (Index c = 0; c < classes; ++c) dz[b * classes + c] = (ex[c] * inv - exact(c == labels[b] ? 1.0 : 0.0)) * scale;
  }
  // Backward, last layer first.
  for (std::size_t l = layers; l-- > 0;) {
    const Index in = widths[l], out = widths[l + 1];
    const Index w_off = store.info("fc" + std::to_string(l + 1) + ".weight").offset;
    const Index b_off = store.info("fc" + std::to_string(l + 1) + ".bias").offset;
    for (Index i = 0; i < out; ++i) {
      for (Index k = 0; k < in; ++k)
        ref.grads[w_off + i * in + k] = dot([&](std::size_t b) { return dz[b * out + i]; },
                                            [&](std::size_t b) { return act[l][b * in + k]; }, std::size_t(batch));
      ref.grads[b_off + i] = double_sum_to_float([&](std::size_t b) { return dz[b * out + i]; }, std::size_t(batch));
    }
    if (l == 0) break;
    std::vector<Rounded> dx(static_cast<std::size_t>(batch * in));
    for (Index b = 0; b < batch; ++b)
      for (Index k = 0; k < in; ++k)
        dx[b * in + k] =
            act[l][b * in + k].v > 0
                ? dot([&](std::size_t i) { return dz[b * out + i]; },
                      [&](std::size_t i) { return weight(l, static_cast<Index>(i), k); }, static_cast<std::size_t>(out))
                : exact(0.0);
    dz = dx;
  }
  return ref;
}

TEST_CASE(
    "MLP gradients: a double reference within its float rounding bound, the reference against finite "
    "differences",
    "[nn]") {
  const ExecutionSpace exec;
  ParameterStore store;
  nn::Mlp mlp(nn::MlpConfig{6, {5, 4}, 3}, store);
  store.allocate();
  mlp.reserve(4);
  CHECK(mlp.describe() == "mlp 6-5-4-3");
  CHECK(store.size() == 5 * 6 + 5 + 4 * 5 + 4 + 3 * 4 + 3);
  mlp.initialize(store.params(), 42, nn::InitScheme::xavier);
  // Biases away from zero so that no ReLU input sits near its kink.
  {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
    Rng rng(3);
    for (Index i = 0; i < store.size(); ++i) h(i) += static_cast<float>(0.1 * rng.normal());
    Kokkos::deep_copy(store.params(), h);
  }
  const Matrix x = random_matrix(4, 6, 7);
  const std::vector<int> label_values = {0, 2, 1, 2};
  const LabelView y = make_labels(label_values);

  GradientRecorder recorder(store.grads());
  nn::StepContext context;
  context.gradient = &recorder;
  const nn::LossResult r = mlp.forward_backward(exec, store.params(), store.grads(), x, y, context);
  CHECK(std::isfinite(r.loss_sum));
  const auto analytic = to_host(store.grads());
  // 0. The backward pass reports each layer (weight and bias), the last first, once it is final,
  // and the layers cover the gradient.
  const std::vector<GradientRange> layers = {{59, 74}, {35, 59}, {0, 35}};
  CHECK(mlp.gradient_order() == layers);
  CHECK(recorder.ranges == layers);
  CHECK(recorder.changed_after_report(analytic) == 0);
  CHECK_NOTHROW(plan_buckets(recorder.ranges, store.size(), BucketOptions{}));
  const auto params_f = to_host(store.params());
  const std::vector<double> params(params_f.begin(), params_f.end());
  auto xh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
  const std::vector<float> xs(xh.data(), xh.data() + xh.size());
  const std::vector<Index> widths = {6, 5, 4, 3};

  // 1. The library's float gradient against the double reference, within the reference's bound.
  const MlpReference ref = mlp_reference(store, params, xs, 4, widths, label_values);
  REQUIRE(ref.kink_margin > 0.0);
  int bad = 0;
  for (Index i = 0; i < store.size(); ++i)
    if (!within(analytic[i], ref.grads[i])) {
      ++bad;
      UNSCOPED_INFO("parameter " << i << ": library " << analytic[i] << ", reference " << ref.grads[i].v << " +- "
                                 << ref.grads[i].e);
    }
  CHECK(bad == 0);
  CHECK_THAT(r.loss_sum / 4, WithinAbs(ref.loss, ref.loss_err + gamma64(4) * ref.loss));

  // 2. The reference's gradient against central differences of its own double loss (the bound is
  // finite_difference_mismatches'). The loss is smooth along
  // each difference's segment: the ReLU masks at both ends equal the unperturbed ones, and with
  // the masks fixed every layer's input is affine in the perturbed parameter, so no ReLU input can
  // cross its kink in between (an affine function changes sign at most once).
  CHECK(finite_difference_mismatches(ref.grads, ref.loss, 1e-5, [&](std::size_t i, double delta) {
          auto p = params;
          p[i] += delta;
          const MlpReference moved = mlp_reference(store, p, xs, 4, widths, label_values);
          REQUIRE(moved.mask == ref.mask);
          return moved.loss;
        }) == 0);
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
  // Row 0 through the rounding mirror; row 1 is exact (exp(0) = 1, the others underflow to 0).
  std::vector<Rounded> ex;
  for (double zc : {1.0, 2.0, 3.0}) ex.push_back(exp32(exact(zc) - exact(3.0)));
  const Rounded sum = ex[0] + ex[1] + ex[2];  // in double, but a float-sized bound is conservative
  const Rounded inv = rounded(1.0 / sum.v, sum.e / (sum.v * (sum.v - sum.e)));
  const Rounded half = exact(0.5);
  const Rounded g00 = (ex[0] * inv - exact(1.0)) * half, g02 = (ex[2] * inv - exact(0.0)) * half;
  // loss_sum = log(sum) - (z_label - zmax) + 0: the log's error is the sum's relative error.
  CHECK_THAT(r.loss_sum, WithinAbs(lse - 1.0, sum.e / (sum.v - sum.e) + gamma64(4) * lse));
  CHECK(r.correct == 1);
  auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dz);
  CHECK(within(g(0, 0), g00));
  CHECK_THAT(g00.v, WithinAbs(0.5 * (std::exp(1.0 - lse) - 1.0), 8 * u64));  // the mirror is the formula
  CHECK(within(g(0, 2), g02));
  CHECK_THAT(g02.v, WithinAbs(0.5 * std::exp(3.0 - lse), 8 * u64));
  CHECK(g(1, 0) == 0.0f);
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
  // He: the first layer's weights have variance 2 / 784; biases are zero. The sample variance of
  // N normal values has relative standard error sqrt(2 / N): 6 standard errors.
  const auto& w = a.info("fc1.weight");
  double s2 = 0;
  for (Index i = 0; i < w.size; ++i) s2 += double(xa[w.offset + i]) * xa[w.offset + i];
  CHECK_THAT(s2 / w.size, WithinRel(2.0 / 784, 6 * std::sqrt(2.0 / double(w.size))));
  for (Index i = 0; i < 256; ++i) CHECK(xa[a.info("fc1.bias").offset + i] == 0.0f);
  CHECK_THROWS_WITH(nn::parse_init_scheme("kaiming"), A2SGD_CONTAINS("he, xavier"));
}

TEST_CASE("the vectorisable exp is within 1 ulp of exp, with IEEE overflow, underflow and NaN", "[nn][math]") {
  // Degree-7 Taylor in double on |r| <= ln2/2 (truncation 6e-9 relative) and one rounding to
  // float: 0.5 ulp plus a hundredth. Swept over every float exponent of the used range.
  double worst = 0.0;
  int special = 0;
  for (float x = -110.0f; x < 90.0f; x += std::max(std::abs(x) * 3e-6f, 1e-7f)) {
    const float got = detail::exp_vectorizable(x);
    const double want = std::exp(double(x));
    const auto wantf = static_cast<float>(want);
    if (wantf == 0.0f || std::isinf(wantf)) {
      special += got != wantf && !(wantf == 0.0f && got <= std::numeric_limits<float>::denorm_min());
      continue;
    }
    const double ulp = double(std::nextafter(wantf, INFINITY)) - wantf;
    worst = std::max(worst, std::abs(double(got) - want) / ulp);
  }
  INFO("largest error " << worst << " ulp");
  CHECK(worst <= 1.0);
  CHECK(special == 0);
  CHECK(detail::exp_vectorizable(0.0f) == 1.0f);
  CHECK(std::isinf(detail::exp_vectorizable(INFINITY)));
  CHECK(detail::exp_vectorizable(-INFINITY) == 0.0f);
  CHECK(std::isnan(detail::exp_vectorizable(std::nanf(""))));
}

TEST_CASE("the vectorisable sigmoid and tanh are within 1 ulp, saturate, and keep NaN", "[nn][math]") {
  // Both are evaluated in double (exp to 6e-9 relative; tanh's Taylor branch to 1e-10) and rounded
  // once: 0.5 ulp plus a small fraction. Swept across both branches of tanh and far into saturation.
  double worst_sigmoid = 0.0, worst_tanh = 0.0;
  auto ulp_error = [](float got, double want) {
    const auto wantf = static_cast<float>(want);
    if (wantf == 0.0f) return got == 0.0f || std::abs(got) <= std::numeric_limits<float>::denorm_min() ? 0.0 : 1e9;
    const double ulp = double(std::nextafter(std::abs(wantf), INFINITY)) - std::abs(wantf);
    return std::abs(double(got) - want) / ulp;
  };
  for (float x = -120.0f; x < 120.0f; x += std::max(std::abs(x) * 2e-6f, 1e-7f)) {
    worst_sigmoid = std::max(worst_sigmoid, ulp_error(detail::sigmoid(x), 1.0 / (1.0 + std::exp(-double(x)))));
    worst_tanh = std::max(worst_tanh, ulp_error(detail::tanh(x), std::tanh(double(x))));
  }
  INFO("largest errors: sigmoid " << worst_sigmoid << " ulp, tanh " << worst_tanh << " ulp");
  CHECK(worst_sigmoid <= 1.0);
  CHECK(worst_tanh <= 1.0);
  CHECK(detail::sigmoid(0.0f) == 0.5f);
  CHECK(detail::sigmoid(200.0f) == 1.0f);
  CHECK(detail::sigmoid(-200.0f) == 0.0f);
  CHECK(detail::sigmoid(INFINITY) == 1.0f);
  CHECK(detail::sigmoid(-INFINITY) == 0.0f);
  CHECK(detail::tanh(0.0f) == 0.0f);
  CHECK(detail::tanh(1e-30f) == 1e-30f);
  CHECK(detail::tanh(30.0f) == 1.0f);
  CHECK(detail::tanh(-INFINITY) == -1.0f);
  CHECK(std::isnan(detail::sigmoid(std::nanf(""))));
  CHECK(std::isnan(detail::tanh(std::nanf(""))));
}

TEST_CASE("column sums add each column's rows in order in double, on strided rows too", "[nn]") {
  // Bias gradients: every backend must round the same in-order double sum once, so the result is
  // compared bit for bit with that reference (a kernel that summed in float, in another order or
  // skipped the last partial block of columns would differ).
  const Index rows = 701, cols = 1000;
  const Matrix full = random_matrix(rows + 3, cols + 37, 5);
  const ConstMatrix dy =
      Kokkos::subview(full, std::make_pair(Index(2), Index(2 + rows)), std::make_pair(Index(5), Index(5 + cols)));
  FloatView out("out", static_cast<std::size_t>(cols));
  nn::column_sums(ExecutionSpace(), dy, out);
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), full);
  const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  int mismatches = 0;
  for (Index c = 0; c < cols; ++c) {
    double s = 0.0;
    for (Index r = 0; r < rows; ++r) s += h(2 + r, 5 + c);
    mismatches += got(c) != static_cast<float>(s);
  }
  CHECK(mismatches == 0);
}
