#pragma once
/// @file GradientBuckets.hpp
/// Gradient buckets: contiguous ranges of the flat gradient, each exchanged by its own collective as
/// soon as the backward pass has finished it (PyTorch DDP's scheme; Li et al., VLDB 2020).

#include <a2sgd/core/GradientListener.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace a2sgd {

/// How gradients are grouped into buckets and whether their collectives overlap the backward pass.
struct BucketOptions {
  /// Largest bucket, in bytes of float32 gradient (DDP's bucket_cap_mb: 25 MiB). 0: one bucket.
  std::size_t bytes = std::size_t(25) << 20;
  /// The first bucket's cap (DDP's 1 MiB): it fills first and starts its collective soonest.
  std::size_t first_bytes = std::size_t(1) << 20;
  /// Start each bucket's collective while the backward pass goes on (when the model reports its
  /// gradients and the method can); false: the same collectives, all started after the backward pass.
  bool overlap = true;

  /// Throws InvalidArgument naming the option: a first cap larger than the cap.
  void validate() const;
  /// "bucket_bytes=...;first_bucket_bytes=...", part of the exchange's signature (ranks must agree:
  /// the buckets are the collectives' sizes).
  std::string signature() const;
};

/// The buckets of a gradient of n values that the backward pass finishes in `order` (groups of
/// values, each reported in one GradientListener call, first group first; Model::gradient_order()).
/// Groups are packed in order: a group joins the open bucket when it is adjacent to it in the buffer
/// and the bucket stays within its cap (options.first_bytes for the first bucket, options.bytes
/// after), otherwise it opens the next bucket; a group larger than the cap is a bucket of its own.
/// An empty order (a model that reports nothing) or options.bytes == 0 gives one bucket [0, n).
/// Throws InvalidArgument unless the groups are non-empty, disjoint and cover [0, n) exactly.
std::vector<GradientRange> plan_buckets(const std::vector<GradientRange>& order, Index n,
                                        const BucketOptions& options);

}  // namespace a2sgd
