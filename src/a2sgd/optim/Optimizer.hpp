#pragma once
/// @file Optimizer.hpp
/// SGD, momentum (heavy-ball or Nesterov), Adam (bias-corrected), all with decoupled weight
/// decay, on the flat parameter buffer.

#include <a2sgd/core/Types.hpp>
#include <a2sgd/optim/impl/UpdateRules.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace a2sgd {

enum class OptimizerKind { sgd, momentum, adam };

/// Parses "sgd" | "momentum" | "adam"; throws InvalidArgument listing the valid names.
OptimizerKind parse_optimizer_kind(std::string_view name);
std::string to_string(OptimizerKind kind);

/// Where an exchange that compresses (A2SGD) keeps the optimizer's moments (docs/algorithm.md,
/// "Momentum and Adam with A2SGD").
enum class MomentScheme {
  decoded,  ///< the optimizer treats the decoded update as its gradient (the specification's step 6)
  local,    ///< each rank's moments from its own gradient; its update direction is what is compressed
  frozen    ///< Adam: as local, with the variance of a dense warm-up frozen afterwards
};

/// Parses "decoded" | "local" | "frozen"; throws InvalidArgument listing the valid names.
MomentScheme parse_moment_scheme(std::string_view name);
std::string to_string(MomentScheme scheme);

/// Hyper-parameters. weight_decay is decoupled (AdamW style): x <- x (1 - lr wd) before the step.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double momentum = 0.9;  ///< momentum: coefficient mu in [0, 1)
  bool nesterov = false;  ///< momentum: Nesterov look-ahead
  double beta1 = 0.9;     ///< adam
  double beta2 = 0.999;   ///< adam
  double epsilon = 1e-8;  ///< adam
  double weight_decay = 0.0;

  /// Throws InvalidArgument naming the first out-of-range value.
  void validate() const;
};

/// Throws InvalidArgument when `scheme` is not defined for this optimizer: frozen needs Adam and at
/// least one warm-up step; the local schemes do not define Nesterov momentum.
void check_moment_scheme(const OptimizerConfig& config, MomentScheme scheme, std::uint64_t warmup_steps);

/// Optimizer state for n parameters plus the update rule.
///
/// Exchanges call visit_step() to obtain this step's per-element rule and fuse it into their
/// own decode kernel; apply() is the stand-alone pass for callers without an exchange.
class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, Index n);

  const OptimizerConfig& config() const noexcept { return m_config; }
  Index size() const noexcept { return m_size; }

  /// Number of steps applied so far (Adam's t after the last step).
  std::uint64_t steps() const noexcept { return m_steps; }
  /// Restores the step counter (checkpoint restart).
  void set_steps(std::uint64_t steps) noexcept { m_steps = steps; }

  /// Per-parameter state tensors ("momentum" | "adam_m", "adam_v"; none for SGD).
  std::vector<NamedView> state() const;

  /// Advances the step counter and calls fn(rule) with this step's device functor
  /// (rule(i, u) updates x(i) and the state of entry i for gradient value u).
  template <class Fn>
  void visit_step(const FloatView& params, double lr, Fn&& fn);

  /// Local moment schemes, before compression (docs/algorithm.md, "Momentum and Adam with
  /// A2SGD"): updates this rank's moments from its own gradient g and overwrites g with its update
  /// direction d, the vector the optimizer would move x by (x -= lr d). SGD: d = g. Momentum:
  /// v <- mu v + g, d = v. Adam: m <- b1 m + (1 - b1) g and, with the local scheme,
  /// s <- b2 s + (1 - b2) g^2; d = (m c1) / (sqrt(s) c2 + eps), where the frozen scheme keeps s and
  /// c2 as the dense warm-up's last step left them. Advances the step counter. Throws
  /// InvalidArgument for a combination the scheme does not define (check_moment_scheme).
  void local_direction(const ExecutionSpace& exec, const FloatView& g, MomentScheme scheme, std::uint64_t warmup_steps);
  /// The same for the entries [begin, end) of g alone, for an exchange that compresses the
  /// gradient bucket by bucket during the backward pass: the step's first call passes
  /// new_step = true (it advances the step counter), the others false; the buckets' calls
  /// together cover every entry once and leave what one call over all would.
  void local_direction(const ExecutionSpace& exec, const FloatView& g, MomentScheme scheme, std::uint64_t warmup_steps,
                       Index begin, Index end, bool new_step);

  /// The rule that applies a decoded direction u after local_direction():
  /// x <- x (1 - lr wd) - lr u. Calls fn(rule); the step was counted by local_direction().
  template <class Fn>
  void visit_direction_step(const FloatView& params, double lr, Fn&& fn) const;

  /// params <- step(scale * grad) as one kernel. Returns how many values of scale * grad were
  /// NaN or +-Inf (they were applied: the caller decides whether that is fatal).
  std::int64_t apply(const ExecutionSpace& exec, const FloatView& params, const ConstFloatView& grad, double lr,
                     float scale = 1.0f);

 private:
  void check_step(const FloatView& params, double lr) const;

  OptimizerConfig m_config;
  Index m_size;
  std::uint64_t m_steps = 0;
  FloatView m_first;   // momentum buffer or Adam m
  FloatView m_second;  // Adam v
};

template <class Fn>
void Optimizer::visit_step(const FloatView& params, double lr, Fn&& fn) {
  check_step(params, lr);
  const auto decay = static_cast<float>(1.0 - lr * m_config.weight_decay);
  const auto flr = static_cast<float>(lr);
  switch (m_config.kind) {
    case OptimizerKind::sgd:
      ++m_steps;
      fn(optim::impl::SgdRule{params, flr, decay});
      break;
    case OptimizerKind::momentum:
      ++m_steps;
      fn(optim::impl::MomentumRule{params, m_first, flr, decay, static_cast<float>(m_config.momentum),
                                   m_config.nesterov});
      break;
    case OptimizerKind::adam: {
      const auto t = static_cast<double>(++m_steps);
      const double c1 = 1.0 / (1.0 - std::pow(m_config.beta1, t));
      const double c2 = 1.0 / std::sqrt(1.0 - std::pow(m_config.beta2, t));
      fn(optim::impl::AdamRule{params, m_first, m_second, flr, decay, static_cast<float>(m_config.beta1),
                               static_cast<float>(m_config.beta2), static_cast<float>(c1), static_cast<float>(c2),
                               static_cast<float>(m_config.epsilon)});
      break;
    }
  }
}

template <class Fn>
void Optimizer::visit_direction_step(const FloatView& params, double lr, Fn&& fn) const {
  check_step(params, lr);
  fn(optim::impl::SgdRule{params, static_cast<float>(lr), static_cast<float>(1.0 - lr * m_config.weight_decay)});
}

}  // namespace a2sgd
