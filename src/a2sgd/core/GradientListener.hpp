#pragma once
/// @file GradientListener.hpp
/// How a model tells the gradient exchange, during its backward pass, which part of the flat
/// gradient is final, so that the exchange can start communicating it while the rest is computed
/// (bucketed overlap, compress/GradientBuckets.hpp). Below both nn/ and compress/.

#include <a2sgd/core/Types.hpp>

namespace a2sgd {

/// Values [begin, end) of the flat gradient buffer.
struct GradientRange {
  Index begin = 0;
  Index end = 0;
  Index size() const noexcept { return end - begin; }
  friend bool operator==(const GradientRange& a, const GradientRange& b) noexcept {
    return a.begin == b.begin && a.end == b.end;
  }
};

/// Receives the backward pass's reports (an Exchange between begin_step() and step()).
class GradientListener {
 public:
  virtual ~GradientListener() = default;
  /// The gradient values in `range` are final: the kernels that write them have been queued on
  /// `exec`, and nothing writes them again before the step. Called on the thread that runs the
  /// backward pass; may call MPI.
  virtual void gradient_ready(const ExecutionSpace& exec, GradientRange range) = 0;
};

}  // namespace a2sgd
