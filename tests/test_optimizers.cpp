#include "RoundingBounds.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/optim/GradientClip.hpp>
#include <a2sgd/optim/LrSchedule.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <cmath>
#include <limits>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

const std::vector<float> x0 = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f};
const std::vector<float> g = {0.5f, -1.0f, 2.0f, 0.0f, -0.25f};

// Runs k steps with the constant gradient g (times `scale` inside the kernel), and the same steps
// in the rounding-bound mirror of the update rules (RoundingBounds.hpp).
struct Run {
  std::vector<float> x;
  std::vector<Rounded> bound;
};

Run run(const OptimizerConfig& cfg, double lr, int k, float scale = 1.0f) {
  Optimizer opt(cfg, static_cast<Index>(x0.size()));
  auto x = to_device(x0);
  auto grad = to_device(g);
  for (int s = 0; s < k; ++s) opt.apply(ExecutionSpace(), x, grad, lr, scale);
  CHECK(opt.steps() == static_cast<std::uint64_t>(k));
  Run out{to_host(x), {}};
  for (std::size_t i = 0; i < x0.size(); ++i) {
    Rounded xi = exact(x0[i]), first, second;
    const Rounded u = exact(scale) * exact(g[i]);
    for (int t = 1; t <= k; ++t) {
      if (cfg.kind == OptimizerKind::sgd) sgd_step(xi, u, lr, cfg.weight_decay);
      if (cfg.kind == OptimizerKind::momentum)
        momentum_step(xi, first, u, lr, cfg.momentum, cfg.nesterov, cfg.weight_decay);
      if (cfg.kind == OptimizerKind::adam)
        adam_step(xi, first, second, u, lr, t, cfg.beta1, cfg.beta2, cfg.epsilon, cfg.weight_decay);
    }
    out.bound.push_back(xi);
  }
  return out;
}

// The closed form `want` against the float result, within the rounding bound of the steps.
void check_close(const Run& got, const std::vector<double>& want) {
  REQUIRE(got.x.size() == want.size());
  for (std::size_t i = 0; i < got.x.size(); ++i) {
    INFO("entry " << i << ": got " << got.x[i] << ", want " << want[i] << ", bound " << got.bound[i].e);
    CHECK(std::abs(got.x[i] - want[i]) <= got.bound[i].e);
    // Sanity of the test itself: the mirror's exact value is the closed form (double rounding apart).
    CHECK(std::abs(got.bound[i].v - want[i]) <= 1e-3 * got.bound[i].e + 64 * u64 * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("SGD: x_k = x_0 - k lr g, and apply's scale multiplies the gradient", "[optim]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::sgd;
  std::vector<double> want(x0.size());
  for (std::size_t i = 0; i < x0.size(); ++i) want[i] = x0[i] - 3 * 0.1 * g[i];
  check_close(run(cfg, 0.1, 3), want);
  for (std::size_t i = 0; i < x0.size(); ++i) want[i] = x0[i] - 3 * 0.1 * 0.25 * g[i];
  check_close(run(cfg, 0.1, 3, 0.25f), want);
}

TEST_CASE("decoupled weight decay shrinks x by (1 - lr wd) before the step", "[optim]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::sgd;
  cfg.weight_decay = 0.5;
  const double lr = 0.1;
  std::vector<double> want(x0.begin(), x0.end());
  for (int s = 0; s < 2; ++s)
    for (std::size_t i = 0; i < x0.size(); ++i) want[i] = want[i] * (1 - lr * 0.5) - lr * g[i];
  check_close(run(cfg, lr, 2), want);
}

TEST_CASE("heavy-ball momentum with a constant gradient", "[optim]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::momentum;
  cfg.momentum = 0.9;
  const double lr = 0.05, mu = 0.9;
  const int k = 4;
  // v_j = g (1 - mu^j) / (1 - mu);  x_k = x_0 - lr sum_j v_j
  double sum_v = 0.0;
  for (int j = 1; j <= k; ++j) sum_v += (1 - std::pow(mu, j)) / (1 - mu);
  std::vector<double> want(x0.size());
  for (std::size_t i = 0; i < x0.size(); ++i) want[i] = x0[i] - lr * sum_v * g[i];
  check_close(run(cfg, lr, k), want);
}

TEST_CASE("Nesterov momentum steps along g + mu v", "[optim]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::momentum;
  cfg.momentum = 0.8;
  cfg.nesterov = true;
  const double lr = 0.05, mu = 0.8;
  const int k = 3;
  double sum_d = 0.0;
  for (int j = 1; j <= k; ++j) sum_d += 1 + mu * (1 - std::pow(mu, j)) / (1 - mu);
  std::vector<double> want(x0.size());
  for (std::size_t i = 0; i < x0.size(); ++i) want[i] = x0[i] - lr * sum_d * g[i];
  check_close(run(cfg, lr, k), want);
}

TEST_CASE("Adam is bias-corrected: with a constant gradient every step is lr g / (|g| + eps)", "[optim]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::adam;
  cfg.epsilon = 1e-8;
  const double lr = 0.01;
  const int k = 5;
  std::vector<double> want(x0.size());
  for (std::size_t i = 0; i < x0.size(); ++i) want[i] = x0[i] - k * lr * g[i] / (std::abs(g[i]) + 1e-8);
  check_close(run(cfg, lr, k), want);

  // Two different gradients: the recurrence written out in double, and its rounding bound.
  Optimizer opt(cfg, 1);
  auto x = to_device({1.0f});
  const double b1 = 0.9, b2 = 0.999;
  double m = 0, v = 0, xr = 1.0;
  Rounded bx = exact(1.0), bm, bv;
  for (int t = 1; t <= 2; ++t) {
    const double gt = t == 1 ? 1.0 : -3.0;
    opt.apply(ExecutionSpace(), x, to_device({static_cast<float>(gt)}), lr);
    m = b1 * m + (1 - b1) * gt;
    v = b2 * v + (1 - b2) * gt * gt;
    xr -= lr * (m / (1 - std::pow(b1, t))) / (std::sqrt(v / (1 - std::pow(b2, t))) + 1e-8);
    adam_step(bx, bm, bv, exact(1.0) * exact(gt), lr, t);
  }
  check_close(Run{to_host(x), {bx}}, {xr});
  REQUIRE(opt.state().size() == 2);
  CHECK(opt.state()[0].name == "adam_m");
  CHECK(std::abs(to_host(opt.state()[0].view)[0] - m) <= bm.e);
  CHECK(std::abs(to_host(opt.state()[1].view)[0] - v) <= bv.e);
}

TEST_CASE("optimizer configuration errors name the value", "[optim]") {
  CHECK(parse_optimizer_kind("adam") == OptimizerKind::adam);
  CHECK_THROWS_WITH(parse_optimizer_kind("adamw"), A2SGD_CONTAINS("unknown optimizer \"adamw\""));
  OptimizerConfig cfg;
  cfg.momentum = 1.0;
  CHECK_THROWS_WITH(Optimizer(cfg, 4), A2SGD_CONTAINS("momentum"));
  cfg = OptimizerConfig{};
  cfg.weight_decay = -1;
  CHECK_THROWS_WITH(Optimizer(cfg, 4), A2SGD_CONTAINS("weight decay"));
  Optimizer opt(OptimizerConfig{}, 4);
  auto x = to_device({0, 0, 0, 0});
  CHECK_THROWS_WITH(opt.apply(ExecutionSpace(), x, to_device({1, 2, 3}), 0.1), A2SGD_CONTAINS("gradient buffer has 3"));
  CHECK_THROWS_WITH(opt.apply(ExecutionSpace(), x, to_device({1, 2, 3, 4}), std::nan("")),
                    A2SGD_CONTAINS("learning rate"));
}

TEST_CASE("learning-rate schedules", "[optim][schedule]") {
  // Schedules are double formulas of at most 8 operations (pow and cos within 1 ulp): gamma64(8).
  LrScheduleConfig c;
  c.base_lr = 0.4;
  SECTION("constant with linear warm-up") {
    c.warmup_steps = 4;
    LrSchedule lr(c);
    CHECK_THAT(lr(0), WithinRel(0.1, gamma64(8)));
    CHECK_THAT(lr(3), WithinRel(0.4, gamma64(8)));
    CHECK_THAT(lr(1000), WithinRel(0.4, gamma64(8)));
  }
  SECTION("step decay counts after the warm-up") {
    c.kind = LrScheduleKind::step;
    c.step_size = 10;
    c.gamma = 0.5;
    c.warmup_steps = 2;
    LrSchedule lr(c);
    CHECK_THAT(lr(2), WithinRel(0.4, gamma64(8)));
    CHECK_THAT(lr(11), WithinRel(0.4, gamma64(8)));
    CHECK_THAT(lr(12), WithinRel(0.2, gamma64(8)));
    CHECK_THAT(lr(32), WithinRel(0.05, gamma64(8)));
  }
  SECTION("cosine from base to min over total steps") {
    c.kind = LrScheduleKind::cosine;
    c.total_steps = 100;
    c.min_lr = 0.0;
    LrSchedule lr(c);
    CHECK_THAT(lr(0), WithinRel(0.4, gamma64(8)));
    CHECK_THAT(lr(50), WithinRel(0.2, gamma64(8)));
    CHECK_THAT(lr(100), WithinAbs(0.0, gamma64(8)));
    CHECK_THAT(lr(500), WithinAbs(0.0, gamma64(8)));
  }
  SECTION("invalid configurations and hooks") {
    c.base_lr = -1;
    CHECK_THROWS_WITH(LrSchedule(c), A2SGD_CONTAINS("learning rate"));
    c.base_lr = 0.1;
    c.kind = LrScheduleKind::cosine;
    c.total_steps = 0;
    CHECK_THROWS_WITH(LrSchedule(c), A2SGD_CONTAINS("total steps"));
    CHECK_THROWS_WITH(parse_lr_schedule_kind("linear"), A2SGD_CONTAINS("constant, step, cosine"));
    LrSchedule hook([](std::uint64_t s) { return s < 5 ? 0.1 : -1.0; });
    CHECK(hook(4) == 0.1);
    CHECK_THROWS_WITH(hook(5), A2SGD_CONTAINS("step 5"));
  }
}

TEST_CASE("plateau schedule: the rate is divided each time the metric fails to improve", "[optim][schedule]") {
  LrScheduleConfig c;
  c.kind = LrScheduleKind::plateau;
  c.base_lr = 20.0;
  LrSchedule lr(c);
  CHECK(lr(0) == 20.0);
  lr.observe(5.0);  // first metric: an improvement on +Inf
  CHECK(lr(10) == 20.0);
  lr.observe(4.0);
  CHECK(lr(20) == 20.0);
  lr.observe(4.0);  // equal is no improvement
  CHECK(lr(30) == 5.0);
  lr.observe(std::nan(""));  // nor is NaN
  CHECK(lr(40) == 1.25);
  lr.observe(3.0);
  CHECK(lr(50) == 1.25);
  CHECK(lr.best() == 3.0);
  // Restored state continues the schedule; invalid state is refused with the values named.
  LrSchedule resumed(c);
  resumed.restore(lr.factor(), lr.best());
  CHECK(resumed(60) == 1.25);
  resumed.observe(3.5);
  CHECK(resumed(70) == 0.3125);
  CHECK_THROWS_WITH(resumed.restore(2.0, 1.0), A2SGD_CONTAINS("factor 2"));
  CHECK_THROWS_WITH(resumed.restore(0.5, std::nan("")), A2SGD_CONTAINS("best"));
  // Other kinds ignore the metric.
  LrScheduleConfig constant;
  LrSchedule flat(constant);
  flat.observe(1.0);
  flat.observe(2.0);
  CHECK(flat(5) == constant.base_lr);
  c.plateau_divisor = 0.5;
  CHECK_THROWS_WITH(LrSchedule(c), A2SGD_CONTAINS("divisor 0.5"));
}

TEST_CASE("plateau schedule: no cut during the linear warm-up", "[optim][schedule]") {
  LrScheduleConfig c;
  c.kind = LrScheduleKind::plateau;
  c.base_lr = 0.002;
  c.warmup_steps = 200;
  LrSchedule lr(c);
  // base_lr * (s + 1) / W: two roundings of a double.
  const double rel = 4 * std::numeric_limits<double>::epsilon();
  CHECK_THAT(lr(99), WithinRel(0.001, rel));
  lr.observe(6.60, 55);
  lr.observe(6.59, 110);
  lr.observe(6.61, 165);  // worse, but the rate is still rising: recorded, not acted on
  CHECK_THAT(lr(199), WithinRel(0.002, rel));
  CHECK(lr.factor() == 1.0);
  CHECK(lr.best() == 6.59);
  lr.observe(6.62, 200);  // the evaluation at the warm-up's last step still belongs to it
  CHECK(lr.factor() == 1.0);
  // After it the best seen during the warm-up is the reference.
  lr.observe(6.595, 201);
  CHECK(lr.factor() == 0.25);
  CHECK_THAT(lr(300), WithinRel(0.0005, rel));
  lr.observe(6.5, 300);
  CHECK(lr.best() == 6.5);
  CHECK(lr.factor() == 0.25);
}

TEST_CASE("global-norm clipping scales the gradient to the maximum norm, or leaves it", "[optim][clip]") {
  const ExecutionSpace exec;
  // g = (3, 4) * k: norm 5 k.
  for (float k : {0.01f, 1.0f, 100.0f}) {
    INFO("k = " << k);
    const auto g = to_device(std::vector<float>{3 * k, 4 * k, 0.0f});
    GradientClipper clip(0.25);
    clip.apply(exec, g);
    const auto h = to_host(g);
    CHECK_THAT(clip.last_norm(exec), WithinRel(5.0 * k, 4 * u32));
    if (5 * k <= 0.25) {
      CHECK(h == std::vector<float>{3 * k, 4 * k, 0.0f});  // untouched, bit for bit
    } else {
      // coef = 0.25 / (5 k + 1e-6) in double, one float rounding of coef and one of each product.
      const double coef = 0.25 / (5.0 * k + 1e-6);
      CHECK_THAT(h[0], WithinRel(3 * k * coef, 3 * u32));
      CHECK_THAT(h[1], WithinRel(4 * k * coef, 3 * u32));
      CHECK(h[2] == 0.0f);
      CHECK_THAT(std::hypot(double(h[0]), double(h[1])), WithinRel(0.25, 1e-6 / (5.0 * k) + 6 * u32));
    }
  }
  const auto bad = to_device(std::vector<float>{1.0f, std::nanf("")});
  GradientClipper(1.0).apply(exec, bad);
  CHECK(std::isnan(to_host(bad)[1]));  // left for the exchange to report
  CHECK_THROWS_WITH(GradientClipper(0.0), A2SGD_CONTAINS("must be positive"));
}
