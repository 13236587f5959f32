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
/// elsewhere; e = a minus what was sent (e[idx] = 0). With planned buckets (plan_buckets()), each
/// bucket of n_b values sends k_b = max(1, round(ratio n_b)) of its own, drawn from a stream keyed
/// by the bucket, in one all-reduce per bucket started as soon as the backward pass finishes it.
class RandomkExchange final : public Exchange {
 public:
  RandomkExchange(const Communicator& comm, Index n, const RandomkOptions& options = {},
                  const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "randomk"; }
  std::vector<PlannedCollective> own_traffic() const override {
    if (m_bucket_k.empty()) return {{CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(m_k)}};
    std::vector<PlannedCollective> t;
    for (Index k : m_bucket_k) t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(k)});
    return t;
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
  /// Folds bucket `index` into the residual and packs its k_b values; then its all-reduce.
  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override;
  /// The fold and the pack of the values `range` into entries [offset, offset + k) of the index and
  /// value buffers, from the permutation keyed by `seed` and the step; then u at the k indices (of
  /// the buffers' first k entries), the optimizer, u cleared. Public for CUDA (device lambdas), run
  /// only inside a step.
  void pack(const FloatView& grad, GradientRange range, Index offset, Index k, std::uint64_t seed);
  void unpack_apply(const FloatView& params, Optimizer& opt, double lr, Index k, StepStats& stats);

 protected:
  bool bucketed() const override { return true; }
  void buckets_planned() override;

 private:
  RandomkOptions m_options;
  Index m_k;
  FloatView m_residual;
  FloatView m_update;  // dense u, zero outside the last step's indices
  // Per-step buffers of k entries, allocated once.
  Kokkos::View<Index*, MemorySpace> m_indices;
  FloatView m_values;
  // Per planned bucket (when there are several): its k_b and where its entries start.
  std::vector<Index> m_bucket_k, m_bucket_offset;
};

}  // namespace a2sgd
