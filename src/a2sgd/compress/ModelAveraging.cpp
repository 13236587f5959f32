#include <a2sgd/compress/ModelAveraging.hpp>

#include <cmath>
#include <sstream>

namespace a2sgd {
namespace {

std::string number_text(double x) {
  std::ostringstream out;
  out.precision(12);
  out << x;
  return out.str();
}

// The ranges, once for validate() and the option parser. The learning rate's upper bound keeps a
// typo (70 for 0.7) from flinging the model away at the first sync.
bool outer_lr_ok(double x) {
  return std::isfinite(x) && x > 0.0 && x <= 10.0;
}
bool outer_momentum_ok(double x) {
  return std::isfinite(x) && x >= 0.0 && x < 1.0;
}

}  // namespace

StateAtAverage parse_state_at_average(std::string_view name) {
  if (name == "keep") return StateAtAverage::keep;
  if (name == "average") return StateAtAverage::average;
  if (name == "reset") return StateAtAverage::reset;
  throw InvalidArgument("unknown state at average \"" + std::string(name) + "\" (valid: keep, average, reset)");
}

std::string to_string(StateAtAverage v) {
  return v == StateAtAverage::keep ? "keep" : v == StateAtAverage::average ? "average" : "reset";
}

OuterOptimizer parse_outer_optimizer(std::string_view name) {
  if (name == "average") return OuterOptimizer::average;
  if (name == "momentum") return OuterOptimizer::momentum;
  if (name == "nesterov") return OuterOptimizer::nesterov;
  throw InvalidArgument("unknown outer optimizer \"" + std::string(name) + "\" (valid: average, momentum, nesterov)");
}

std::string to_string(OuterOptimizer v) {
  return v == OuterOptimizer::average ? "average" : v == OuterOptimizer::momentum ? "momentum" : "nesterov";
}

void AveragingOptions::validate() const {
  if (!outer_lr_ok(outer_lr))
    throw InvalidArgument("averaging: outer learning rate " + number_text(outer_lr) + " must be in (0, 10]");
  if (!outer_momentum_ok(outer_momentum))
    throw InvalidArgument("averaging: outer momentum " + number_text(outer_momentum) + " must be in [0, 1)");
  if (every == 0 && outer != OuterOptimizer::average)
    throw InvalidArgument("averaging: the outer optimizer " + to_string(outer) +
                          " acts at the periodic average: needs an averaging period K > 0");
  if (every == 0 && state_at_average != StateAtAverage::keep)
    throw InvalidArgument("averaging: state at average " + to_string(state_at_average) +
                          " acts at the periodic average: needs an averaging period K > 0");
}

std::vector<std::pair<std::string, std::string>> AveragingOptions::entries() const {
  std::vector<std::pair<std::string, std::string>> e;
  if (every > 0) e.emplace_back("average_every", std::to_string(every));
  if (outer != OuterOptimizer::average) {
    e.emplace_back("outer_optimizer", to_string(outer));
    e.emplace_back("outer_lr", number_text(outer_lr));
    e.emplace_back("outer_momentum", number_text(outer_momentum));
  }
  if (state_at_average != StateAtAverage::keep) e.emplace_back("state_at_average", to_string(state_at_average));
  return e;
}

const std::vector<OptionSpec>& averaging_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"average-every", "0",
       "average the replicas' parameters after every K-th step, any method (0: never; the final average for "
       "evaluation only)"},
      {"outer-optimizer",
       "average",
       "the step at each average: average (the replicas' mean) | momentum | nesterov (DiLoCo: from the last "
       "synchronised model along the mean of the replicas' moves, with momentum)",
       {"average", "momentum", "nesterov"}},
      {"outer-lr", "1", "the outer optimizer's learning rate, in (0, 10] (DiLoCo: 0.7)"},
      {"outer-momentum", "0", "the outer optimizer's momentum, in [0, 1) (DiLoCo: 0.9)"},
      {"state-at-average",
       "keep",
       "the optimizer's first moment (momentum buffer, Adam's m) at each average: keep (per rank) | average (with "
       "the parameters: 4n more bytes) | reset (to zero)",
       {"keep", "average", "reset"}},
  };
  return specs;
}

AveragingOptions parse_averaging_options(const OptionValues& o) {
  AveragingOptions a;
  const std::int64_t every = o.integer("average-every");
  o.require(every >= 0, "average-every", "must not be negative (0: never)");
  a.every = static_cast<std::uint64_t>(every);
  try {
    a.outer = parse_outer_optimizer(o.text("outer-optimizer"));
  } catch (const InvalidArgument&) {
    o.require(false, "outer-optimizer", "valid: average, momentum, nesterov");
  }
  a.outer_lr = o.number("outer-lr");
  o.require(outer_lr_ok(a.outer_lr), "outer-lr", "must be in (0, 10]");
  a.outer_momentum = o.number("outer-momentum");
  o.require(outer_momentum_ok(a.outer_momentum), "outer-momentum", "must be in [0, 1)");
  try {
    a.state_at_average = parse_state_at_average(o.text("state-at-average"));
  } catch (const InvalidArgument&) {
    o.require(false, "state-at-average", "valid: keep, average, reset");
  }
  o.require(a.every > 0 || a.outer == OuterOptimizer::average, "outer-optimizer",
            "acts at the periodic average: needs --average-every K > 0");
  o.require(a.every > 0 || a.state_at_average == StateAtAverage::keep, "state-at-average",
            "acts at the periodic average: needs --average-every K > 0");
  return a;
}

void check_averaging_optimizer(const AveragingOptions& a, const OptimizerConfig& opt) {
  if (opt.kind == OptimizerKind::sgd && a.state_at_average != StateAtAverage::keep)
    throw OptionError("averaging", "state-at-average", to_string(a.state_at_average),
                      "plain SGD has no optimizer state; use --optimizer momentum or adam, or keep");
}

}  // namespace a2sgd
