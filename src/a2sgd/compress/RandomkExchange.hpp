#pragma once
/// @file RandomkExchange.hpp
/// Random-K sparsification with error feedback (docs/algorithm.md, "Baselines").

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

struct RandomkOptions {
  /// k = max(1, round(ratio * n)) entries per step.
  double ratio = 0.001;
  /// Seed of the index stream; with the step number it gives every rank the same k indices.
  std::uint64_t seed = 0;
};

/// a = g + e; all ranks draw the same k distinct indices from (seed, step), so no index is sent
/// (the first k values of a keyed pseudo-random permutation of [0, n), impl/IndexPermutation.hpp,
/// computed in the kernel that gathers the values);
/// one all-reduce of the k values a[idx] (4k bytes per rank); u[idx] = sum / p, zero
/// elsewhere; e = a minus what was sent (e[idx] = 0).
class RandomkExchange final : public Exchange {
 public:
  RandomkExchange(const Communicator& comm, Index n, const RandomkOptions& options = {},
                  const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "randomk"; }
  std::vector<PlannedCollective> own_traffic() const override {
    return {{CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(m_k)}};
  }
  std::vector<std::pair<std::string, std::string>> own_options() const override;
  std::vector<NamedView> own_state() const override { return {{"residual", m_residual}}; }

  Index k() const noexcept { return m_k; }
  const FloatView& residual() const noexcept { return m_residual; }

  /// The k distinct indices of step `step` (ascending), identical on every rank.
  std::vector<Index> indices(std::uint64_t step) const;

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;

 private:
  RandomkOptions m_options;
  Index m_k;
  FloatView m_residual;
  FloatView m_update;  // dense u, zero outside the last step's indices
  // Per-step buffers of k entries, allocated once.
  Kokkos::View<Index*, MemorySpace> m_indices;
  FloatView m_values;
};

}  // namespace a2sgd
