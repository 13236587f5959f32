#pragma once
/// @file A2sgdExchange.hpp
/// A2SGD, two-level gradient averaging (docs/algorithm.md steps 2-6): O(1) bytes per rank per step.

#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/A2sgdOptions.hpp>
#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/TwoMeans.hpp>

#include <vector>

namespace a2sgd {

/// A2SGD exchange. Per step: one fused reduction per segment (the whole buffer, or each tensor
/// with layer granularity; compress_s), exactly one MPI_Allreduce of 2 (mean) or 4 (weighted)
/// doubles per segment (comm_s), one fused residual + update + optimizer pass per segment
/// (optimizer_s). The residual e is this rank's state ("residual", n float32 values).
///
/// With layer granularity, A2sgdOptions::buckets and planned buckets (plan_buckets(): whole tensors each) the segments
/// are encoded and all-reduced bucket by bucket, one non-blocking all-reduce each, started during
/// the backward pass when armed (Exchange::begin_step()); the optimizer's local direction (momentum,
/// Adam) is formed per bucket too. With one segment for the model nothing can start before the
/// whole gradient is there: model granularity does not bucket.
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
  const std::vector<Index>& segment_bounds() const noexcept { return m_codec.bounds(); }

  /// Scalars each rank hands to MPI per A2SGD step: 2 or 4 per segment.
  int payload_scalars() const noexcept { return static_cast<int>(m_codec.payload_words()); }

 protected:
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;
  bool bucketed() const override { return m_options.granularity == Granularity::layer && m_options.buckets; }
  void buckets_planned() override;
  /// The bucket's local direction and segments encoded, then the all-reduce of their scalars (in
  /// a dense warm-up step: of the bucket's gradient).
  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override;

 private:
  std::int64_t compress(const FloatView& grad, Optimizer& opt, StepStats& stats);
  void communicate(std::int64_t non_finite, StepStats& stats);
  void take_global_means(std::int64_t non_finite);
  // Per planned bucket (empty with one bucket): its segments [first, last) and the step's
  // non-finite count of its encode.
  struct Part {
    std::size_t first = 0, last = 0;
    std::int64_t non_finite = 0;
  };
  std::vector<Part> m_parts;
  void apply(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats);

  A2sgdOptions m_options;
  FloatView m_residual;
  A2sgdCodec m_codec;             // the kernels (A2sgdCodec.hpp), shared with the PyTorch hook
  std::vector<double> m_payload;  // sized once: steps allocate nothing
  std::vector<TwoMeansResult> m_local;
  std::vector<std::pair<double, double>> m_global;  // the step's global averages, before they are checked
  std::vector<std::pair<double, double>> m_last_global;
  std::vector<std::pair<double, double>> m_last_local;
};

}  // namespace a2sgd
