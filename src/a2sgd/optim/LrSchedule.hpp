#pragma once
/// @file LrSchedule.hpp
/// Learning-rate schedules: constant, step decay, cosine, divide-on-plateau, each with an optional
/// linear warm-up, or any user function of the step.

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

namespace a2sgd {

enum class LrScheduleKind { constant, step, cosine, plateau };

/// Parses "constant" | "step" | "cosine" | "plateau"; throws InvalidArgument listing the valid names.
LrScheduleKind parse_lr_schedule_kind(std::string_view name);
std::string to_string(LrScheduleKind kind);

struct LrScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::constant;
  double base_lr = 0.1;
  /// Linear warm-up: lr rises as base_lr * (s + 1) / warmup_steps over the first warmup_steps
  /// steps; the schedule proper starts counting after it.
  std::uint64_t warmup_steps = 0;
  /// step: lr = base_lr * gamma^floor(s / step_size)
  std::uint64_t step_size = 1000;
  double gamma = 0.1;
  /// cosine: from base_lr down to min_lr over total_steps (warm-up included), then min_lr.
  std::uint64_t total_steps = 0;
  double min_lr = 0.0;
  /// plateau: lr = base_lr / plateau_divisor^k, k the number of evaluations whose metric did not
  /// improve on the best one before it (LrSchedule::observe).
  double plateau_divisor = 4.0;

  void validate() const;
};

/// Learning rate as a function of the 0-based step index.
class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleConfig& config);
  /// A user hook: any function of the step (must return a finite value >= 0).
  explicit LrSchedule(std::function<double(std::uint64_t)> fn);

  double operator()(std::uint64_t step) const;

  /// Reports an evaluation metric (lower is better, e.g. the validation loss) taken after
  /// `steps_done` steps. A plateau schedule divides its rate when the metric is not below the best
  /// seen, but not during the linear warm-up (steps_done <= warmup_steps): there the rising rate,
  /// not a plateau, decides the metric, and an evaluation only records the best. The other kinds
  /// ignore the metric.
  void observe(double metric, std::uint64_t steps_done = std::numeric_limits<std::uint64_t>::max());
  /// The plateau state (factor applied to the rate, best metric so far), for checkpoints.
  double factor() const noexcept { return m_factor; }
  double best() const noexcept { return m_best; }
  /// Restores factor() and best(); InvalidArgument unless factor is in (0, 1] and best a number.
  void restore(double factor, double best);

 private:
  std::function<double(std::uint64_t)> m_fn;
  double m_divisor = 1.0;  // 1: observe() changes nothing
  std::uint64_t m_warmup = 0;
  double m_factor = 1.0;
  double m_best = HUGE_VAL;
};

}  // namespace a2sgd
