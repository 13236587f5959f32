#pragma once
/// @file TopkExchange.hpp
/// Top-K sparsification with error feedback (docs/algorithm.md, "Baselines").

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

struct TopkOptions {
  /// k = max(1, round(ratio * n)) entries per rank and step.
  double ratio = 0.001;
};

/// a = g + e; each rank keeps the k entries of largest |a| (ties: lower index first), sends k
/// (index, value) pairs by one allgather (8 bytes per pair: uint32 index, float32 value), and
/// applies u = (sum of all ranks' sparse vectors) / p; e = a minus what was sent.
///
/// Selection does not sort the gradient: a strided sample of |a| gives a threshold expected to
/// admit about 2k entries, one pass counts the entries above it (the threshold is lowered or
/// raised and counted again in the rare case the count falls outside [k, 8k]), one scan pass
/// compacts them, and an exact selection of k among those candidates finishes on the host.
/// Cost: three passes over n plus O(k log k) on the candidates. n must be below 2^32.
class TopkExchange final : public Exchange {
 public:
  TopkExchange(const Communicator& comm, Index n, const TopkOptions& options = {},
               const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "topk"; }
  std::vector<PlannedCollective> step_traffic() const override {
    return {{CollectiveKind::allgather, 8u * static_cast<std::uint64_t>(m_k)}};
  }
  std::vector<std::pair<std::string, std::string>> options() const override;
  std::vector<NamedView> state() const override { return {{"residual", m_residual}}; }

  Index k() const noexcept { return m_k; }
  const FloatView& residual() const noexcept { return m_residual; }
  /// This rank's indices selected in the last step (ascending).
  const std::vector<std::uint32_t>& last_selection() const noexcept { return m_selected; }

  /// The selection on its own: indices of the k largest |a| (ties: lower index first), ascending.
  static std::vector<std::uint32_t> select(const ExecutionSpace& exec, const ConstFloatView& a, Index k);

  /// The step's body (call step()); public only because CUDA requires the function enclosing
  /// a device lambda to be accessible.
  void do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) override;

 private:
  TopkOptions m_options;
  Index m_k;
  FloatView m_residual;  // holds a = g + e during a step
  FloatView m_update;    // dense u, zero outside the entries touched by the last step
  std::vector<std::uint32_t> m_selected;
  // Per-step buffers of fixed size (k, k p), allocated once.
  Kokkos::View<std::uint32_t*, MemorySpace> m_selected_device;
  Kokkos::View<std::uint64_t*, MemorySpace> m_payload;
  Kokkos::View<std::uint64_t*, MemorySpace>::HostMirror m_host_payload;
  Kokkos::View<std::uint64_t*, MemorySpace> m_gathered;
  Kokkos::View<std::uint64_t*, MemorySpace>::HostMirror m_host_gathered;
};

}  // namespace a2sgd
