#pragma once
/// @file A2sgdExchange.hpp
/// A2SGD, two-level gradient averaging (docs/algorithm.md steps 2-6): O(1) bytes per rank per step.

#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/TwoMeans.hpp>

#include <string_view>
#include <vector>

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

/// Which entries share a pair of averages.
enum class Granularity {
  model,  ///< the whole gradient: 2 scalars per rank (the paper's method)
  layer   ///< every tensor of the model its own two averages: 2 L scalars, still one all-reduce
};

/// What happens to an entry whose compressed value (the gradient, or with momentum and Adam the
/// rank's optimizer direction) is exactly zero in a step: the entries of an embedding's rows for
/// words absent from the batch, say (docs/algorithm.md, "Entries without a gradient").
enum class ZeroGradient {
  move,  ///< classified by the sign of g + e = e like any other: moves by M and sheds a mean (the paper's method)
  hold   ///< belongs to neither set: neither moves nor changes its residual this step
};

GlobalAveraging parse_global_averaging(std::string_view name);
ZeroGradient parse_zero_gradient(std::string_view name);
std::string to_string(ZeroGradient v);
Granularity parse_granularity(std::string_view name);
std::string to_string(Granularity v);
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
  /// Kept for code written before averaging became a policy of every method: the same as
  /// CommonExchangeOptions::averaging.every (the constructor takes whichever is set; both set
  /// differently is an error). 0 = never: pure O(1) traffic.
  std::uint64_t average_every = 0;
  Granularity granularity = Granularity::model;
  /// Entries whose compressed value is exactly zero: classified by their residual's sign (move) or
  /// left out of the step (hold).
  ZeroGradient zero_gradient = ZeroGradient::move;
  /// Where momentum and Adam keep their moments (docs/algorithm.md, "Momentum and Adam with
  /// A2SGD"): local (each rank's optimizer direction is compressed: momentum correction; the
  /// default, since decoded moments collapse with heavy momentum), decoded (the optimizer treats
  /// the decoded update as its gradient: the specification's step 6 read literally) or frozen
  /// (Adam's variance from the dense warm-up, then frozen; needs warmup_steps >= 1). SGD: all
  /// three are the same step.
  MomentScheme moments = MomentScheme::local;
  /// Kept likewise: the same as CommonExchangeOptions::averaging.state_at_average.
  StateAtAverage state_at_average = StateAtAverage::keep;
  /// Layer granularity: the tensors' sizes in buffer order, summing to n (make_exchange fills
  /// them from ExchangeConfig::layout). Ignored for model granularity.
  std::vector<Index> segments;
};

/// A2SGD exchange. Per step: one fused reduction per segment (the whole buffer, or each tensor
/// with layer granularity; compress_s), exactly one MPI_Allreduce of 2 (mean) or 4 (weighted)
/// doubles per segment (comm_s), one fused residual + update + optimizer pass per segment
/// (optimizer_s). The residual e is this rank's state ("residual", n float32 values).
///
/// A non-finite entry in g + e on any rank poisons that rank's payload with NaN, so every rank
/// sees it in the same all-reduce and throws NonFiniteError before touching parameters or state.
class A2sgdExchange final : public Exchange {
 public:
  A2sgdExchange(const Communicator& comm, Index n, const A2sgdOptions& options = {},
                const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "a2sgd"; }
  /// The two (or four) scalars per segment each step (a dense warm-up's steps excepted).
  std::vector<PlannedCollective> own_traffic() const override;
  std::vector<std::pair<std::string, std::string>> own_options() const override;
  std::vector<NamedView> own_state() const override { return {{"residual", m_residual}}; }
  std::uint64_t synchronous_steps() const override { return m_options.warmup_steps; }

  const A2sgdOptions& a2sgd_options() const noexcept { return m_options; }
  const FloatView& residual() const noexcept { return m_residual; }

  /// The two global averages (M_pos, M_neg) applied in the last A2SGD step (the first segment's).
  std::pair<double, double> last_global_means() const noexcept { return m_last_global.front(); }
  /// This rank's two local averages (mu_pos, mu_neg) of the last A2SGD step (the first segment's).
  std::pair<double, double> last_local_means() const noexcept { return m_last_local.front(); }
  /// The same for every segment, in buffer order.
  const std::vector<std::pair<double, double>>& last_segment_global_means() const noexcept { return m_last_global; }
  const std::vector<std::pair<double, double>>& last_segment_local_means() const noexcept { return m_last_local; }
  /// Segment boundaries: segment s is [bounds[s], bounds[s + 1]).
  const std::vector<Index>& segment_bounds() const noexcept { return m_bounds; }

  /// Scalars each rank hands to MPI per A2SGD step: 2 or 4 per segment.
  int payload_scalars() const noexcept {
    return (m_options.averaging == GlobalAveraging::mean ? 2 : 4) * static_cast<int>(m_bounds.size() - 1);
  }

 protected:
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;

 private:
  std::int64_t compress(const FloatView& grad, Optimizer& opt, StepStats& stats);
  void communicate(std::int64_t non_finite, StepStats& stats);
  void apply(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats);

  A2sgdOptions m_options;
  FloatView m_residual;
  std::vector<Index> m_bounds;
  std::vector<double> m_payload;  // sized once: steps allocate nothing
  std::vector<TwoMeansResult> m_local;
  std::vector<std::pair<double, double>> m_last_global;
  std::vector<std::pair<double, double>> m_last_local;
};

}  // namespace a2sgd
