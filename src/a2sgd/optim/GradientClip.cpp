#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/Norms.hpp>
#include <a2sgd/optim/GradientClip.hpp>

#include <cmath>
#include <string>

namespace a2sgd {

GradientClipper::GradientClipper(double max_norm) : m_max_norm(max_norm), m_norm2("a2sgd::optim::clip_norm2") {
  if (!(std::isfinite(max_norm) && max_norm > 0.0))
    throw InvalidArgument("gradient clipping: maximum norm " + std::to_string(max_norm) +
                          " must be positive and finite");
}

void GradientClipper::apply(const ExecutionSpace& exec, const FloatView& grads) const {
  const Index n = static_cast<Index>(grads.extent(0));
  // In double, at memory speed (blocked SIMD partial sums on the host): the norm reads every
  // gradient once per step, as much traffic as the scaling itself.
  detail::squared_norm(exec, grads, m_norm2);
  const Kokkos::View<double, MemorySpace> norm2 = m_norm2;
  const double max_norm = m_max_norm;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::optim::clip_scale"), Policy(exec, 0, n), KOKKOS_LAMBDA(Index i) {
        const double coef = max_norm / (detail::sqrt(norm2()) + 1e-6);
        if (coef < 1.0) grads(i) *= static_cast<float>(coef);
      });
}

double GradientClipper::last_norm(const ExecutionSpace& exec) const {
  double v = 0.0;
  Kokkos::deep_copy(exec, v, m_norm2);
  exec.fence();
  return std::sqrt(v);
}

}  // namespace a2sgd
