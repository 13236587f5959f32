#include <a2sgd/core/Error.hpp>
#include <a2sgd/optim/Optimizer.hpp>

namespace a2sgd {

OptimizerKind parse_optimizer_kind(std::string_view name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "momentum") return OptimizerKind::momentum;
  if (name == "adam") return OptimizerKind::adam;
  throw InvalidArgument("unknown optimizer \"" + std::string(name) + "\" (valid: sgd, momentum, adam)");
}

std::string to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::momentum:
      return "momentum";
    case OptimizerKind::adam:
      return "adam";
  }
  return "?";
}

void OptimizerConfig::validate() const {
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v < hi; };
  if (!in(momentum, 0.0, 1.0))
    throw InvalidArgument("optimizer: momentum " + std::to_string(momentum) + " is not in [0, 1)");
  if (!in(beta1, 0.0, 1.0)) throw InvalidArgument("optimizer: beta1 " + std::to_string(beta1) + " is not in [0, 1)");
  if (!in(beta2, 0.0, 1.0)) throw InvalidArgument("optimizer: beta2 " + std::to_string(beta2) + " is not in [0, 1)");
  if (!(std::isfinite(epsilon) && epsilon > 0.0))
    throw InvalidArgument("optimizer: epsilon " + std::to_string(epsilon) + " must be positive");
  if (!in(weight_decay, 0.0, 1e300))
    throw InvalidArgument("optimizer: weight decay " + std::to_string(weight_decay) + " must be >= 0");
}

Optimizer::Optimizer(const OptimizerConfig& config, Index n) : m_config(config), m_size(n) {
  m_config.validate();
  if (n < 0) throw InvalidArgument("optimizer: negative parameter count " + std::to_string(n));
  const auto count = static_cast<std::size_t>(n);
  if (m_config.kind == OptimizerKind::momentum) m_first = FloatView("a2sgd::optim::momentum", count);
  if (m_config.kind == OptimizerKind::adam) {
    m_first = FloatView("a2sgd::optim::adam_m", count);
    m_second = FloatView("a2sgd::optim::adam_v", count);
  }
}

std::vector<NamedView> Optimizer::state() const {
  switch (m_config.kind) {
    case OptimizerKind::sgd:
      return {};
    case OptimizerKind::momentum:
      return {{"momentum", m_first}};
    case OptimizerKind::adam:
      return {{"adam_m", m_first}, {"adam_v", m_second}};
  }
  return {};
}

void Optimizer::check_step(const FloatView& params, double lr) const {
  if (static_cast<Index>(params.extent(0)) != m_size)
    throw InvalidArgument("optimizer: parameter buffer has " + std::to_string(params.extent(0)) +
                          " values, the optimizer was built for " + std::to_string(m_size));
  if (!(std::isfinite(lr) && lr >= 0.0))
    throw InvalidArgument("optimizer: learning rate " + std::to_string(lr) + " must be finite and >= 0");
}

std::int64_t Optimizer::apply(const ExecutionSpace& exec, const FloatView& params, const ConstFloatView& grad,
                              double lr, float scale) {
  if (static_cast<Index>(grad.extent(0)) != m_size)
    throw InvalidArgument("optimizer: gradient buffer has " + std::to_string(grad.extent(0)) +
                          " values, the optimizer was built for " + std::to_string(m_size));
  std::int64_t non_finite = 0;
  visit_step(params, lr, [&](const auto& rule) {
    using Rule = std::decay_t<decltype(rule)>;
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::optim::apply"),
                            Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, m_size),
                            optim::impl::ApplyScaled<Rule>{grad, scale, rule}, non_finite);
  });
  return non_finite;
}

}  // namespace a2sgd
