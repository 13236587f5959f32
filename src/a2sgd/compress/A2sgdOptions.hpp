#pragma once
/// @file A2sgdOptions.hpp
/// A2SGD's options: the enums and the options struct that both the codec (A2sgdCodec.hpp) and the
/// exchange (A2sgdExchange.hpp) read, below both of them.

#include <a2sgd/compress/ModelAveraging.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <cstdint>
#include <string>
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
  /// Layer granularity: all-reduce the segments' scalars per gradient bucket (Exchange::
  /// plan_buckets()), each bucket as soon as the backward pass has finished it, instead of once
  /// after it. Off by default: measured no faster (a few scalars per tensor leave little to hide;
  /// docs/design.md).
  bool buckets = false;
};

/// The options of A2SGD's encode and decode (A2sgdOptions' per-step part): what the codec needs.
struct A2sgdCodecOptions {
  GlobalAveraging averaging = GlobalAveraging::mean;
  ResidualReference residual = ResidualReference::local;
  bool error_feedback = true;
  ZeroGradient zero_gradient = ZeroGradient::move;
};

/// The codec's part of an A2sgdOptions.
inline A2sgdCodecOptions codec_options(const A2sgdOptions& o) noexcept {
  return {o.averaging, o.residual, o.error_feedback, o.zero_gradient};
}

}  // namespace a2sgd
