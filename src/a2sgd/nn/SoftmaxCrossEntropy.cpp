#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>

namespace a2sgd::nn {
namespace {

// sum_c exp(z_c - zmax), storing each exp in d when d is not null: compiled per ISA
// (impl/HostClones.hpp), AVX-512 evaluates 8 exps in double per instruction.
A2SGD_HOST_CLONES double exp_sum(const float* z, float zmax, float* d, Index classes) {
  double sum = 0.0;
  if (d) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : sum)
#endif
    for (Index c = 0; c < classes; ++c) {
      const float e = detail::exp_vectorizable(z[c] - zmax);
      d[c] = e;
      sum += e;
    }
  } else {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(+ : sum)
#endif
    for (Index c = 0; c < classes; ++c) sum += detail::exp_vectorizable(z[c] - zmax);
  }
  return sum;
}

// max_c z[c], compiled per ISA.
A2SGD_HOST_CLONES float row_max(const float* z, Index classes) {
  float zmax = z[0];
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(max : zmax)
#endif
  for (Index c = 0; c < classes; ++c) zmax = z[c] > zmax ? z[c] : zmax;
  return zmax;
}

// d[c] = (d[c] inv - [c == label]) scale in place (d holds the exps), compiled per ISA.
A2SGD_HOST_CLONES void scale_gradient(float* d, float inv, int label, float scale, Index classes) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (Index c = 0; c < classes; ++c) d[c] = (d[c] * inv - (c == label ? 1.0f : 0.0f)) * scale;
}

// The lowest index c with z[c] == v (classes if none), so that ties resolve the same on every
// backend: chunks tested with a vectorised compare, the one that holds v scanned.
A2SGD_HOST_CLONES Index first_index_of(const float* z, float v, Index classes) {
  constexpr Index chunk = 64;
  for (Index c0 = 0; c0 < classes; c0 += chunk) {
    const Index end = c0 + chunk < classes ? c0 + chunk : classes;
    int hit = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(| : hit)
#endif
    for (Index c = c0; c < end; ++c) hit |= z[c] == v;
    if (hit)
      for (Index c = c0; c < end; ++c)
        if (z[c] == v) return c;
  }
  return classes;
}

// What both backends' functors read.
struct SoftmaxArgs {
  ConstMatrix logits;
  ConstLabelView labels;
  Matrix dlogits;
  float grad_scale;
  Index classes;
  bool want_grad;
};

// Host backends: one row per work item, three vectorised passes over its contiguous classes (max,
// exp and sum, gradient), exp evaluated once per entry. At 10,000 classes exp dominates the loss.
template <bool HostBackend>  // a template: device builds never compile it (it calls host-only ISA clones)
struct SoftmaxRows : SoftmaxArgs {
  KOKKOS_INLINE_FUNCTION void operator()(Index i, double& loss, std::int64_t& correct) const {
    const float* z = &logits(i, 0);
    const float zmax = row_max(z, classes);
    const Index arg = first_index_of(z, zmax, classes);
    const int label = labels(i);
    const double sum = exp_sum(z, zmax, want_grad ? &dlogits(i, 0) : nullptr, classes);
    if (want_grad) scale_gradient(&dlogits(i, 0), static_cast<float>(1.0 / sum), label, grad_scale, classes);
    loss += detail::log(sum) - static_cast<double>(z[label] - zmax);
    correct += arg == label;
  }
};

// Devices: one team per row, its threads over the classes (a row of 10,000 classes is one
// block); exp(z - max) is stored in dlogits and scaled in place, so it is evaluated once.
struct SoftmaxTeams : SoftmaxArgs {
  using Team = Kokkos::TeamPolicy<ExecutionSpace>;

  KOKKOS_INLINE_FUNCTION void operator()(const Team::member_type& team, double& loss, std::int64_t& correct) const {
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
        range,
        [&](Index c, double& s) {
          const float e = detail::exp_vectorizable(logits(i, c) - zmax);
          if (want_grad) dlogits(i, c) = e;
          s += e;
        },
        sum);
    const int label = labels(i);
    if (want_grad) {
      const float inv = static_cast<float>(1.0 / sum);
      Kokkos::parallel_for(
          range, [&](Index c) { dlogits(i, c) = (dlogits(i, c) * inv - (c == label ? 1.0f : 0.0f)) * grad_scale; });
    }
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      loss += detail::log(sum) - static_cast<double>(logits(i, label) - zmax);
      correct += arg == label;
    });
  }
};

// A template, so that the branch a backend does not take is never instantiated (the host
// functor calls host-only ISA clones).
template <bool HostBackend>
void run(const ExecutionSpace& exec, const ConstMatrix& logits, const ConstLabelView& labels, const Matrix& dlogits,
         float grad_scale, LossResult& r) {
  const Index rows = static_cast<Index>(logits.extent(0));
  const SoftmaxArgs args{
      logits, labels, dlogits, grad_scale, static_cast<Index>(logits.extent(1)), dlogits.extent(0) > 0};
  if constexpr (HostBackend) {
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::nn::softmax_cross_entropy"),
                            Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, rows),
                            SoftmaxRows<HostBackend>{args}, r.loss_sum, r.correct);
  } else {
    Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::nn::softmax_cross_entropy"),
                            SoftmaxTeams::Team(exec, static_cast<int>(rows), Kokkos::AUTO), SoftmaxTeams{args},
                            r.loss_sum, r.correct);
  }
}

}  // namespace

LossResult softmax_cross_entropy(const ExecutionSpace& exec, const ConstMatrix& logits, const ConstLabelView& labels,
                                 const Matrix& dlogits, float grad_scale) {
  LossResult r;
  r.count = static_cast<std::int64_t>(logits.extent(0));
  if (r.count == 0) return r;
  run<host_backend>(exec, logits, labels, dlogits, grad_scale, r);
  return r;
}

}  // namespace a2sgd::nn
