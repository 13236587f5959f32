#pragma once
/// @file LrSchedule.hpp
/// Learning-rate schedules: constant, step decay, cosine, each with an optional linear warm-up,
/// or any user function of the step.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace a2sgd {

enum class LrScheduleKind { constant, step, cosine };

/// Parses "constant" | "step" | "cosine"; throws InvalidArgument listing the valid names.
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

  void validate() const;
};

/// Learning rate as a function of the 0-based step index.
class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleConfig& config);
  /// A user hook: any function of the step (must return a finite value >= 0).
  explicit LrSchedule(std::function<double(std::uint64_t)> fn);

  double operator()(std::uint64_t step) const;

 private:
  std::function<double(std::uint64_t)> m_fn;
};

}  // namespace a2sgd
