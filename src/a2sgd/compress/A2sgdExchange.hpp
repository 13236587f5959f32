#pragma once
/// @file A2sgdExchange.hpp
/// A2SGD, two-level gradient averaging (docs/algorithm.md steps 2-6): O(1) bytes per rank per step.

#include <a2sgd/compress/Exchange.hpp>

#include <string_view>

namespace a2sgd {

/// How the ranks' local averages are combined.
enum class GlobalAveraging {
  mean,     ///< M = (1/p) sum_r mu_r: 2 scalars per rank (the paper's method)
  weighted  ///< M = sum_r S_r / sum_r N_r (count-weighted): 4 scalars per rank
};

/// Which averages the residual is measured against.
enum class ResidualReference {
  local,  ///< e = a - mu_local(sign): sums to zero over each sign set (the paper's method)
  global  ///< e = a - M_global(sign)
};

GlobalAveraging parse_global_averaging(std::string_view name);
ResidualReference parse_residual_reference(std::string_view name);
std::string to_string(GlobalAveraging v);
std::string to_string(ResidualReference v);

struct A2sgdOptions {
  GlobalAveraging averaging = GlobalAveraging::mean;
  ResidualReference residual = ResidualReference::local;
  /// Error feedback: carry e = a - c into the next step. Off only for ablations.
  bool error_feedback = true;
  /// The first warmup_steps steps use a dense all-reduce (residual untouched).
  std::uint64_t warmup_steps = 0;
  /// Average the replicas' parameters after every K-th step (0 = never: pure O(1) traffic).
  std::uint64_t average_every = 0;
};

/// A2SGD exchange. Per step: one fused reduction (compress_s), exactly one MPI_Allreduce of 2
/// (mean) or 4 (weighted) doubles (comm_s), one fused residual + update + optimizer pass
/// (optimizer_s). The residual e is this rank's state ("residual", n float32 values).
///
/// A non-finite entry in g + e on any rank poisons that rank's payload with NaN, so every rank
/// sees it in the same all-reduce and throws NonFiniteError before touching parameters or state.
class A2sgdExchange final : public Exchange {
 public:
  A2sgdExchange(const Communicator& comm, Index n, const A2sgdOptions& options = {},
                const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "a2sgd"; }
  std::vector<PlannedCollective> step_traffic() const override {
    return {{CollectiveKind::allreduce, 8u * static_cast<std::uint64_t>(payload_scalars())}};
  }
  std::vector<std::pair<std::string, std::string>> options() const override;
  std::vector<NamedView> state() const override { return {{"residual", m_residual}}; }

  const A2sgdOptions& a2sgd_options() const noexcept { return m_options; }
  const FloatView& residual() const noexcept { return m_residual; }

  /// The two global averages (M_pos, M_neg) applied in the last A2SGD step.
  std::pair<double, double> last_global_means() const noexcept { return m_last_global; }
  /// This rank's two local averages (mu_pos, mu_neg) of the last A2SGD step.
  std::pair<double, double> last_local_means() const noexcept { return m_last_local; }

  /// Scalars each rank hands to MPI per A2SGD step (2 or 4).
  int payload_scalars() const noexcept { return m_options.averaging == GlobalAveraging::mean ? 2 : 4; }

 protected:
  void do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) override;

 private:
  A2sgdOptions m_options;
  FloatView m_residual;
  std::pair<double, double> m_last_global{0.0, 0.0};
  std::pair<double, double> m_last_local{0.0, 0.0};
};

}  // namespace a2sgd
