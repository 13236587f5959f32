#pragma once
/// @file SoftmaxCrossEntropy.hpp
/// Softmax cross-entropy loss over a mini-batch, fused with its gradient and the accuracy count.

#include <a2sgd/core/Types.hpp>

namespace a2sgd::nn {

struct LossResult {
  double loss_sum = 0.0;     ///< sum over rows of -log softmax(z)[label]
  std::int64_t correct = 0;  ///< rows whose arg-max equals the label
  std::int64_t count = 0;    ///< rows (predictions) in the sum
};

/// One pass over the rows of `logits` [B, C]: loss and accuracy, and, when `dlogits` is
/// non-empty, dlogits = (softmax(z) - onehot(label)) * grad_scale (grad_scale = 1/B gives the
/// gradient of the mean loss). Numerically stable (max-shifted log-sum-exp).
LossResult softmax_cross_entropy(const ExecutionSpace& exec, const ConstMatrix& logits, const ConstLabelView& labels,
                                 const Matrix& dlogits, float grad_scale);

}  // namespace a2sgd::nn
