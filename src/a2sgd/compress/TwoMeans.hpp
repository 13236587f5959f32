#pragma once
/// @file TwoMeans.hpp
/// The A2SGD encode pass: one fused reduction over a = g + e giving the sums and counts of the
/// positive and negative entries, plus the number of non-finite entries.

#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd {

/// Sums (double) and counts of the positive and negative entries of a; zeros belong to neither.
/// `non_finite` counts NaN and +-Inf entries; when it is non-zero the sums, counts and means
/// are meaningless and the caller must treat the input as an error.
struct TwoMeansResult {
  double sum_pos = 0.0;
  double sum_neg = 0.0;
  std::int64_t count_pos = 0;
  std::int64_t count_neg = 0;
  std::int64_t non_finite = 0;

  /// Mean of the positive entries; 0 for an empty set.
  double mean_pos() const noexcept { return count_pos > 0 ? sum_pos / static_cast<double>(count_pos) : 0.0; }
  /// Mean of the negative entries; 0 for an empty set.
  double mean_neg() const noexcept { return count_neg > 0 ? sum_neg / static_cast<double>(count_neg) : 0.0; }
};

/// One labelled pass ("a2sgd::compress::two_means") over a = g + e, or a = g when `e` is empty
/// (error feedback off). g and e must have the same length when e is non-empty.
TwoMeansResult two_means(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e);

/// The same pass for ZeroGradient::hold ("a2sgd::compress::two_means_held"): a = g + e over the
/// entries with g != 0 only; an entry with g == 0 belongs to neither set, whatever its residual.
/// g and e must have the same length.
TwoMeansResult two_means_held(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e);

}  // namespace a2sgd
