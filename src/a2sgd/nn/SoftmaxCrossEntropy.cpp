#include <a2sgd/core/Math.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>

namespace a2sgd::nn {

LossResult softmax_cross_entropy(const ExecutionSpace& exec, const ConstMatrix& logits, const ConstLabelView& labels,
                                 const Matrix& dlogits, float grad_scale) {
  const Index rows = static_cast<Index>(logits.extent(0));
  const Index classes = static_cast<Index>(logits.extent(1));
  const bool want_grad = dlogits.extent(0) > 0;
  LossResult r;
  Kokkos::parallel_reduce(
      "a2sgd::nn::softmax_cross_entropy", Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, rows),
      KOKKOS_LAMBDA(Index i, double& loss, std::int64_t& correct) {
        float zmax = logits(i, 0);
        Index arg = 0;
        for (Index c = 1; c < classes; ++c)
          if (logits(i, c) > zmax) zmax = logits(i, c), arg = c;
        double sum = 0.0;
        for (Index c = 0; c < classes; ++c) sum += a2sgd::detail::exp(logits(i, c) - zmax);
        const int label = labels(i);
        loss += a2sgd::detail::log(sum) - static_cast<double>(logits(i, label) - zmax);
        correct += arg == label;
        if (want_grad) {
          const float inv = static_cast<float>(1.0 / sum);
          for (Index c = 0; c < classes; ++c)
            dlogits(i, c) = (a2sgd::detail::exp(logits(i, c) - zmax) * inv - (c == label ? 1.0f : 0.0f)) * grad_scale;
        }
      },
      r.loss_sum, r.correct);
  return r;
}

}  // namespace a2sgd::nn
