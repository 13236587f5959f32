#pragma once
/// @file A2sgdApply.hpp
/// The per-entry body of A2SGD's decode pass, shared by A2sgdExchange (fused with the optimizer)
/// and A2sgdCodec::decode_in_place (the update written back into the gradient).

#include <a2sgd/compress/A2sgdOptions.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include <utility>
#include <vector>

namespace a2sgd::impl {

// Decode + residual + a rule (the optimizer's update, or a write of u), one pass: reads g and e once,
// writes e once and hands u to the rule. Hold: an entry with g == 0 joins neither class; then
// a = 0 + e = e exactly, so the residual keeps its value without a branch, and the rule sees a zero
// direction. The rule may overwrite g(i): this entry's g is read before.
template <class Rule, bool ErrorFeedback, bool Hold>
struct A2sgdApply {
  ConstFloatView g;
  FloatView e;
  float ref_pos, ref_neg;  // residual reference (local or global averages)
  float upd_pos, upd_neg;  // the global averages M_pos, M_neg
  Rule rule;

  // Masks instead of branches: signs are close to random, a branch would mispredict half the time.
  KOKKOS_INLINE_FUNCTION void operator()(Index i) const {
    const float gi = g(i);
    const float a = ErrorFeedback ? gi + e(i) : gi;
    const bool active = !Hold || gi != 0.0f;
    const auto pos = static_cast<float>(active && a > 0.0f);
    const auto neg = static_cast<float>(active && a < 0.0f);
    if (ErrorFeedback) e(i) = a - (pos * ref_pos + neg * ref_neg);
    rule(i, pos * upd_pos + neg * upd_neg);
  }
};

// One A2sgdApply pass per segment with the segment's averages: the residual measured against the
// local (or global) averages, the update the global ones.
template <class Rule>
void a2sgd_apply_segments(const ExecutionSpace& exec, const A2sgdCodecOptions& o, const ConstFloatView& g,
                          const FloatView& e, const std::vector<Index>& bounds,
                          const std::pair<double, double>* local_means, const std::pair<double, double>* global_means,
                          const Rule& rule) {
  const bool global_ref = o.residual == ResidualReference::global;
  const bool ef = o.error_feedback, hold = ef && o.zero_gradient == ZeroGradient::hold;
  for (std::size_t s = 0; s + 1 < bounds.size(); ++s) {
    const auto [m_pos, m_neg] = global_means[s];
    const auto [mu_pos, mu_neg] = local_means[s];
    const auto ref_pos = static_cast<float>(global_ref ? m_pos : mu_pos);
    const auto ref_neg = static_cast<float>(global_ref ? m_neg : mu_neg);
    const auto upd_pos = static_cast<float>(m_pos);
    const auto upd_neg = static_cast<float>(m_neg);
    // Compiled per ISA on host backends: the pass is arithmetic enough that the baseline ISA's 4
    // lanes would bound it below memory speed.
    const auto run = [&](auto functor) {
      simd_parallel_for(A2SGD_LABEL("a2sgd::compress::a2sgd_apply"), exec, bounds[s], bounds[s + 1], functor);
    };
    if (hold)
      run(A2sgdApply<Rule, true, true>{g, e, ref_pos, ref_neg, upd_pos, upd_neg, rule});
    else if (ef)
      run(A2sgdApply<Rule, true, false>{g, e, ref_pos, ref_neg, upd_pos, upd_neg, rule});
    else
      run(A2sgdApply<Rule, false, false>{g, e, ref_pos, ref_neg, upd_pos, upd_neg, rule});
  }
}

}  // namespace a2sgd::impl
