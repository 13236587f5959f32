#pragma once
/// @file UpdateRules.hpp
/// Per-element optimizer updates as small device functors. An exchange fuses one of these into
/// its decode pass, so reading g, e, x and optimizer state happens once per step.

#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Types.hpp>

namespace a2sgd::optim::impl {

/// x <- x (1 - lr wd) - lr u
struct SgdRule {
  FloatView x;
  float lr;
  float decay;  // 1 - lr * weight_decay (decoupled weight decay)
  KOKKOS_INLINE_FUNCTION void operator()(Index i, float u) const { x(i) = x(i) * decay - lr * u; }
};

/// v <- mu v + u;  d = nesterov ? u + mu v : v;  x <- x (1 - lr wd) - lr d   (PyTorch convention)
struct MomentumRule {
  FloatView x;
  FloatView v;
  float lr;
  float decay;
  float mu;
  bool nesterov;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, float u) const {
    const float vi = mu * v(i) + u;
    v(i) = vi;
    const float d = nesterov ? u + mu * vi : vi;
    x(i) = x(i) * decay - lr * d;
  }
};

/// Adam with bias correction: m <- b1 m + (1-b1) u;  s <- b2 s + (1-b2) u^2;
/// x <- x (1 - lr wd) - lr (m c1) / (sqrt(s) c2 + eps), c1 = 1/(1-b1^t), c2 = 1/sqrt(1-b2^t).
struct AdamRule {
  FloatView x;
  FloatView m;
  FloatView s;
  float lr;
  float decay;
  float beta1;
  float beta2;
  float c1;
  float c2;
  float eps;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, float u) const {
    const float mi = beta1 * m(i) + (1.0f - beta1) * u;
    const float si = beta2 * s(i) + (1.0f - beta2) * u * u;
    m(i) = mi;
    s(i) = si;
    x(i) = x(i) * decay - lr * (mi * c1) / (a2sgd::detail::sqrt(si) * c2 + eps);
  }
};

/// Unfused application: rule(i, scale * g(i)) over the whole buffer, counting the non-finite
/// gradient values on the way (an integer sum: no latency-bound chain).
template <class Rule>
struct ApplyScaled {
  ConstFloatView g;
  float scale;
  Rule rule;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, std::int64_t& non_finite) const {
    const float u = scale * g(i);
    non_finite += a2sgd::detail::non_finite(u);
    rule(i, u);
  }
};

}  // namespace a2sgd::optim::impl
