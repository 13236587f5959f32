#include <a2sgd/core/Math.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>

namespace a2sgd::nn {

LossResult softmax_cross_entropy(const ExecutionSpace& exec, const ConstMatrix& logits, const ConstLabelView& labels,
                                 const Matrix& dlogits, float grad_scale) {
  using Team = Kokkos::TeamPolicy<ExecutionSpace>;
  constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
  const Index rows = static_cast<Index>(logits.extent(0));
  const Index classes = static_cast<Index>(logits.extent(1));
  const bool want_grad = dlogits.extent(0) > 0;
  LossResult r;
  r.count = rows;
  if (rows == 0) return r;
  // One team per row, its threads over the classes (a row of 10,000 classes is one block on a
  // GPU; host teams are one thread). The argmax is the lowest index of the maximum, so ties
  // resolve the same on every backend.
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::nn::softmax_cross_entropy"), Team(exec, static_cast<int>(rows), host_backend ? 1 : 128),
      KOKKOS_LAMBDA(const Team::member_type& team, double& loss, std::int64_t& correct) {
        const Index i = team.league_rank();
        const auto range = Kokkos::TeamThreadRange(team, classes);
        float zmax = logits(i, 0);
        Kokkos::parallel_reduce(
            range, [&](Index c, float& m) { m = logits(i, c) > m ? logits(i, c) : m; }, Kokkos::Max<float>(zmax));
        Index arg = classes;
        Kokkos::parallel_reduce(
            range, [&](Index c, Index& a) { a = logits(i, c) == zmax && c < a ? c : a; }, Kokkos::Min<Index>(arg));
        double sum = 0.0;
        Kokkos::parallel_reduce(
            range, [&](Index c, double& s) { s += a2sgd::detail::exp(logits(i, c) - zmax); }, sum);
        const int label = labels(i);
        if (want_grad) {
          const float inv = static_cast<float>(1.0 / sum);
          Kokkos::parallel_for(range, [&](Index c) {
            dlogits(i, c) = (a2sgd::detail::exp(logits(i, c) - zmax) * inv - (c == label ? 1.0f : 0.0f)) * grad_scale;
          });
        }
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          loss += a2sgd::detail::log(sum) - static_cast<double>(logits(i, label) - zmax);
          correct += arg == label;
        });
      },
      r.loss_sum, r.correct);
  return r;
}

}  // namespace a2sgd::nn
