#pragma once
/// @file GradientClip.hpp
/// Global-norm gradient clipping on the device: g <- g * min(1, max_norm / (||g||_2 + 1e-6))
/// (PyTorch's clip_grad_norm_), applied to a rank's local gradient before the exchange.

#include <a2sgd/core/Types.hpp>

namespace a2sgd {

class GradientClipper {
 public:
  /// max_norm > 0 and finite (InvalidArgument otherwise).
  explicit GradientClipper(double max_norm);

  /// Queues the norm reduction and the scaling on `exec`; the norm never travels to the host, so
  /// the step does not wait for it. A non-finite norm leaves g unchanged (the exchange reports it).
  void apply(const ExecutionSpace& exec, const FloatView& grads) const;

  /// The norm of the last apply() (fences `exec`; for logs, not for the step).
  double last_norm(const ExecutionSpace& exec) const;

  double max_norm() const noexcept { return m_max_norm; }

 private:
  double m_max_norm;
  Kokkos::View<double, MemorySpace> m_norm2;
};

}  // namespace a2sgd
