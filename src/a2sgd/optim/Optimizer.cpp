#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
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

MomentScheme parse_moment_scheme(std::string_view name) {
  if (name == "decoded") return MomentScheme::decoded;
  if (name == "local") return MomentScheme::local;
  if (name == "frozen") return MomentScheme::frozen;
  throw InvalidArgument("unknown moment scheme \"" + std::string(name) + "\" (valid: decoded, local, frozen)");
}

std::string to_string(MomentScheme scheme) {
  switch (scheme) {
    case MomentScheme::decoded:
      return "decoded";
    case MomentScheme::local:
      return "local";
    case MomentScheme::frozen:
      return "frozen";
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

void check_moment_scheme(const OptimizerConfig& config, MomentScheme scheme, std::uint64_t warmup_steps) {
  if (scheme == MomentScheme::frozen && config.kind != OptimizerKind::adam)
    throw InvalidArgument("the frozen moment scheme is defined for Adam only (optimizer " + to_string(config.kind) +
                          "; use the local scheme)");
  if (scheme == MomentScheme::frozen && warmup_steps == 0)
    throw InvalidArgument(
        "the frozen moment scheme estimates Adam's variance during the dense warm-up: it needs at least one "
        "warm-up step");
  if (scheme != MomentScheme::decoded && config.kind == OptimizerKind::momentum && config.nesterov)
    throw InvalidArgument(
        "Nesterov momentum is not defined for the local moment scheme (heavy-ball momentum, or the decoded scheme)");
}

void Optimizer::local_direction(const ExecutionSpace& exec, const FloatView& g, MomentScheme scheme,
                                std::uint64_t warmup_steps) {
  local_direction(exec, g, scheme, warmup_steps, 0, m_size, true);
}

void Optimizer::local_direction(const ExecutionSpace& exec, const FloatView& g, MomentScheme scheme,
                                std::uint64_t warmup_steps, Index begin, Index end, bool new_step) {
  check_moment_scheme(m_config, scheme, warmup_steps);
  if (static_cast<Index>(g.extent(0)) != m_size)
    throw InvalidArgument("optimizer: gradient buffer has " + std::to_string(g.extent(0)) +
                          " values, the optimizer was built for " + std::to_string(m_size));
  if (begin < 0 || begin > end || end > m_size)
    throw InvalidArgument("optimizer: range [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside the " +
                          std::to_string(m_size) + " parameters");
  if (new_step) ++m_steps;
  if (m_steps == 0) throw InvalidArgument("optimizer: a bucket's local direction before its step's first");
  const FloatView m = m_first, s = m_second;
  const auto t = static_cast<double>(m_steps);
  if (m_config.kind == OptimizerKind::momentum) {
    const auto mu = static_cast<float>(m_config.momentum);
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::optim::local_momentum"), Policy(exec, begin, end), KOKKOS_LAMBDA(Index i) {
          const float v = mu * m(i) + g(i);
          m(i) = v;
          g(i) = v;
        });
  } else if (m_config.kind == OptimizerKind::adam) {
    const auto b1 = static_cast<float>(m_config.beta1), b2 = static_cast<float>(m_config.beta2);
    const bool frozen = scheme == MomentScheme::frozen;
    // The frozen variance keeps the bias correction of the step it froze at.
    const double t2 = frozen ? static_cast<double>(warmup_steps) : t;
    const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(m_config.beta1, t)));
    const auto c2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(m_config.beta2, t2)));
    const auto eps = static_cast<float>(m_config.epsilon);
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::optim::local_adam"), Policy(exec, begin, end), KOKKOS_LAMBDA(Index i) {
          const float gi = g(i);
          const float mi = b1 * m(i) + (1.0f - b1) * gi;
          m(i) = mi;
          float si = s(i);
          if (!frozen) {
            si = b2 * si + (1.0f - b2) * gi * gi;
            s(i) = si;
          }
          g(i) = (mi * c1) / (detail::sqrt(si) * c2 + eps);
        });
  }
}

namespace {

// Host backends: rule(i, scale g[i]) over a block as one SIMD loop compiled per ISA (like A2SGD's
// fused pass), returning the sum of u * 0: 0 while every u is finite, NaN as soon as one is not
// (one float add per value instead of a test and a 64-bit count); the count is taken afterwards,
// only when the sum says there is something to count.
template <class Rule>
A2SGD_HOST_CLONES float apply_block(const float* g, float scale, const Rule& rule, Index begin, Index end) {
  // A local copy: with the rule passed by value (in memory), GCC reloaded its fields after every
  // store through x and kept the loop scalar; the copy's fields stay in registers.
  const Rule local = rule;
  float poison = 0.0f;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : poison)
#endif
  for (Index i = begin; i < end; ++i) {
    const float u = scale * g[i];
    poison += u * 0.0f;
    local(i, u);
  }
  return poison;
}

template <class Rule>
struct ApplyBlocked {
  static constexpr Index block = 4096;
  ConstFloatView g;
  float scale;
  Rule rule;
  Index n;
  KOKKOS_INLINE_FUNCTION void operator()(Index b, float& poison) const {
    const Index begin = b * block;
    poison += apply_block(g.data(), scale, rule, begin, begin + block < n ? begin + block : n);
  }
};

// A template, so that a device build, which never takes the host branch that uses it, does not
// compile (and warn about) an unreferenced operator().
template <class View>
struct CountNonFinite {
  View g;
  float scale;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, std::int64_t& count) const {
    count += detail::non_finite(scale * g(i));
  }
};

}  // namespace

std::int64_t Optimizer::apply(const ExecutionSpace& exec, const FloatView& params, const ConstFloatView& grad,
                              double lr, float scale) {
  if (static_cast<Index>(grad.extent(0)) != m_size)
    throw InvalidArgument("optimizer: gradient buffer has " + std::to_string(grad.extent(0)) +
                          " values, the optimizer was built for " + std::to_string(m_size));
  using Range = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
  std::int64_t non_finite = 0;
  visit_step(params, lr, [&](const auto& rule) {
    using Rule = std::decay_t<decltype(rule)>;
    if constexpr (host_backend) {
      using Blocked = ApplyBlocked<Rule>;
      float poison = 0.0f;
      Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::optim::apply"),
                              Range(exec, 0, (m_size + Blocked::block - 1) / Blocked::block),
                              Blocked{grad, scale, rule, m_size}, poison);
      if (poison != 0.0f)  // NaN (or an infinity's NaN): count what was applied
        Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::optim::count_non_finite"), Range(exec, 0, m_size),
                                CountNonFinite<ConstFloatView>{grad, scale}, non_finite);
    } else {
      Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::optim::apply"), Range(exec, 0, m_size),
                              optim::impl::ApplyScaled<Rule>{grad, scale, rule}, non_finite);
    }
  });
  return non_finite;
}

}  // namespace a2sgd
