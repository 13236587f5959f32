#include <a2sgd/core/Error.hpp>
#include <a2sgd/optim/LrSchedule.hpp>

#include <cmath>

namespace a2sgd {

LrScheduleKind parse_lr_schedule_kind(std::string_view name) {
  if (name == "constant") return LrScheduleKind::constant;
  if (name == "step") return LrScheduleKind::step;
  if (name == "cosine") return LrScheduleKind::cosine;
  if (name == "plateau") return LrScheduleKind::plateau;
  throw InvalidArgument("unknown learning-rate schedule \"" + std::string(name) +
                        "\" (valid: constant, step, cosine, plateau)");
}

std::string to_string(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::constant:
      return "constant";
    case LrScheduleKind::step:
      return "step";
    case LrScheduleKind::cosine:
      return "cosine";
    case LrScheduleKind::plateau:
      return "plateau";
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
  if (kind == LrScheduleKind::plateau && !(std::isfinite(plateau_divisor) && plateau_divisor >= 1.0))
    throw InvalidArgument("plateau schedule: divisor " + std::to_string(plateau_divisor) + " must be >= 1");
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
  if (config.kind == LrScheduleKind::plateau) m_divisor = config.plateau_divisor;
  m_warmup = config.warmup_steps;
  m_fn = [c = config](std::uint64_t step) {
    if (step < c.warmup_steps) return c.base_lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
    const std::uint64_t s = step - c.warmup_steps;
    switch (c.kind) {
      case LrScheduleKind::constant:
      case LrScheduleKind::plateau:  // the factor is applied by operator()
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
  const double lr = m_fn(step) * m_factor;
  if (!(std::isfinite(lr) && lr >= 0.0))
    throw InvalidArgument("learning-rate schedule returned " + std::to_string(lr) + " at step " + std::to_string(step));
  return lr;
}

void LrSchedule::observe(double metric, std::uint64_t steps_done) {
  if (metric < m_best)
    m_best = metric;
  else if (steps_done > m_warmup)
    m_factor /= m_divisor;  // also for a non-finite metric: it is no improvement
}

void LrSchedule::restore(double factor, double best) {
  if (!(std::isfinite(factor) && factor > 0.0 && factor <= 1.0) || std::isnan(best))
    throw InvalidArgument("learning-rate schedule state: factor " + std::to_string(factor) + ", best " +
                          std::to_string(best) + " (the factor must be in (0, 1], the best metric a number)");
  m_factor = factor;
  m_best = best;
}

}  // namespace a2sgd
