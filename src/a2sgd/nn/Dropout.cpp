#include <a2sgd/core/Random.hpp>
#include <a2sgd/nn/Dropout.hpp>

namespace a2sgd::nn {

std::uint64_t dropout_key(const StepContext& context, unsigned site) {
  const std::uint64_t per_step =
      derive_seed(derive_seed(context.seed, context.step), static_cast<std::uint64_t>(context.rank));
  return derive_seed(per_step, site);
}

void dropout(const ExecutionSpace& exec, const ConstMatrix& x, const Matrix& y, float p, std::uint64_t key) {
  const Index cols = static_cast<Index>(x.extent(1));
  const float scale = 1.0f / (1.0f - p);
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::dropout"),
      Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>(exec, {0, 0}, {static_cast<Index>(x.extent(0)), cols}),
      KOKKOS_LAMBDA(Index r, Index c) {
        const bool keep = dropout_keep(key, static_cast<std::uint64_t>(r * cols + c), p);
        y(r, c) = keep ? x(r, c) * scale : 0.0f;
      });
}

}  // namespace a2sgd::nn
