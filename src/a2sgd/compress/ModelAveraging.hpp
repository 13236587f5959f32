#pragma once
/// @file ModelAveraging.hpp
/// Periodic model averaging, a policy of every exchange method (docs/algorithm.md, "Periodic
/// averaging and the outer optimizer"): after every K-th step the replicas' parameters are
/// averaged with one all-reduce of 4n bytes, and an outer optimizer may turn that average into a
/// step from the last synchronised model (DiLoCo's outer Nesterov, Douillard et al. 2023).
///
/// With theta the model of the last synchronisation (identical on every rank) and xbar the mean
/// of the replicas, the pseudo-gradient is delta = theta - xbar, and
///   average:  theta <- xbar                                    (plain periodic averaging)
///   momentum: v <- mu v + delta;  theta <- theta - lr_o v
///   nesterov: v <- mu v + delta;  theta <- theta - lr_o (delta + mu v)   (torch's SGD form)
/// after which every replica restarts from theta. lr_o = 1, mu = 0 is the plain average; the
/// plain average is computed as such (no theta is kept), bit for bit what it always was.

#include <a2sgd/core/Options.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace a2sgd {

/// What the periodic average does to the optimizer's first moment (the momentum buffer, Adam's
/// m), which with local steps follows each rank's own gradients.
enum class StateAtAverage {
  keep,     ///< left per rank (the replicas' parameters alone are averaged)
  average,  ///< averaged over the ranks with the parameters: one more all-reduce of 4n bytes
  reset     ///< set to zero on every rank: no traffic, the moment restarts from the averaged model
};

/// The step taken at each synchronisation.
enum class OuterOptimizer {
  average,   ///< the replicas' mean (lr_o and mu unused)
  momentum,  ///< SGD with heavy-ball momentum on the pseudo-gradient
  nesterov   ///< SGD with Nesterov momentum on the pseudo-gradient (DiLoCo)
};

StateAtAverage parse_state_at_average(std::string_view name);
std::string to_string(StateAtAverage v);
OuterOptimizer parse_outer_optimizer(std::string_view name);
std::string to_string(OuterOptimizer v);

/// The averaging policy of an exchange (CommonExchangeOptions::averaging).
struct AveragingOptions {
  /// Synchronise after every K-th step (0: never; the trainer's final average for evaluation and
  /// export is then the only one: one-shot averaging).
  std::uint64_t every = 0;
  OuterOptimizer outer = OuterOptimizer::average;
  double outer_lr = 1.0;        ///< lr_o, in (0, 10]
  double outer_momentum = 0.0;  ///< mu, in [0, 1)
  StateAtAverage state_at_average = StateAtAverage::keep;

  /// Whether an outer optimizer keeps theta and v (two more model-sized buffers).
  bool has_outer_state() const noexcept { return every > 0 && outer != OuterOptimizer::average; }
  /// Throws InvalidArgument naming the first value out of range or a setting that needs a period.
  void validate() const;
  /// The settings that differ from the defaults, as (key, value) text for logs and checkpoint
  /// metadata ("average_every", "outer_optimizer", "outer_lr", "outer_momentum",
  /// "state_at_average"); empty for the defaults.
  std::vector<std::pair<std::string, std::string>> entries() const;
};

/// The averaging options as declared options (owner "averaging"; a2sgd-train spells each one
/// --<name>): average-every, outer-optimizer, outer-lr, outer-momentum, state-at-average.
const std::vector<OptionSpec>& averaging_option_specs();
/// Reads and checks them (OptionError naming the option).
AveragingOptions parse_averaging_options(const OptionValues& values);

/// Throws OptionError (owner "averaging") when the policy cannot work with this optimizer: a
/// first-moment treatment needs momentum or Adam.
void check_averaging_optimizer(const AveragingOptions& averaging, const OptimizerConfig& optimizer);

/// DiLoCo's outer optimizer, as its paper sets it: Nesterov, lr_o 0.7, mu 0.9.
inline AveragingOptions diloco_averaging(std::uint64_t every) {
  AveragingOptions a;
  a.every = every;
  a.outer = OuterOptimizer::nesterov;
  a.outer_lr = 0.7;
  a.outer_momentum = 0.9;
  return a;
}

}  // namespace a2sgd
