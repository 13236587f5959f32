#include <a2sgd/core/Error.hpp>
#include <a2sgd/optim/LrSchedule.hpp>

#include <cmath>

namespace a2sgd {

LrScheduleKind parse_lr_schedule_kind(std::string_view name) {
  if (name == "constant") return LrScheduleKind::constant;
  if (name == "step") return LrScheduleKind::step;
  if (name == "cosine") return LrScheduleKind::cosine;
  throw InvalidArgument("unknown learning-rate schedule \"" + std::string(name) + "\" (valid: constant, step, cosine)");
}

std::string to_string(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::constant:
      return "constant";
    case LrScheduleKind::step:
      return "step";
    case LrScheduleKind::cosine:
      return "cosine";
  }
  return "?";
}

void LrScheduleConfig::validate() const {
  if (!(std::isfinite(base_lr) && base_lr > 0.0))
    throw InvalidArgument("learning rate " + std::to_string(base_lr) + " must be positive and finite");
  if (kind == LrScheduleKind::step) {
    if (step_size == 0) throw InvalidArgument("step schedule: step size must be >= 1");
    if (!(gamma > 0.0 && gamma <= 1.0))
      throw InvalidArgument("step schedule: gamma " + std::to_string(gamma) + " is not in (0, 1]");
  }
  if (kind == LrScheduleKind::cosine) {
    if (total_steps <= warmup_steps)
      throw InvalidArgument("cosine schedule: total steps (" + std::to_string(total_steps) +
                            ") must exceed the warm-up steps (" + std::to_string(warmup_steps) + ")");
    if (!(min_lr >= 0.0 && min_lr <= base_lr))
      throw InvalidArgument("cosine schedule: minimum lr " + std::to_string(min_lr) + " is not in [0, base lr]");
  }
}

LrSchedule::LrSchedule(const LrScheduleConfig& config) {
  config.validate();
  m_fn = [c = config](std::uint64_t step) {
    if (step < c.warmup_steps) return c.base_lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
    const std::uint64_t s = step - c.warmup_steps;
    switch (c.kind) {
      case LrScheduleKind::constant:
        return c.base_lr;
      case LrScheduleKind::step:
        return c.base_lr * std::pow(c.gamma, static_cast<double>(s / c.step_size));
      case LrScheduleKind::cosine: {
        const double span = static_cast<double>(c.total_steps - c.warmup_steps);
        const double t = std::min(1.0, static_cast<double>(s) / span);
        return c.min_lr + 0.5 * (c.base_lr - c.min_lr) * (1.0 + std::cos(M_PI * t));
      }
    }
    return c.base_lr;
  };
}

LrSchedule::LrSchedule(std::function<double(std::uint64_t)> fn) : m_fn(std::move(fn)) {
  if (!m_fn) throw InvalidArgument("LrSchedule: empty function");
}

double LrSchedule::operator()(std::uint64_t step) const {
  const double lr = m_fn(step);
  if (!(std::isfinite(lr) && lr >= 0.0))
    throw InvalidArgument("learning-rate schedule returned " + std::to_string(lr) + " at step " + std::to_string(step));
  return lr;
}

}  // namespace a2sgd
