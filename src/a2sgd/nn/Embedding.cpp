#include <a2sgd/nn/Embedding.hpp>

namespace a2sgd::nn {

void embedding_forward(const ExecutionSpace& exec, const ConstTokenMatrix& tokens, Index time, const MatrixView& table,
                       const Matrix& y) {
  const Index columns = static_cast<Index>(tokens.extent(1));
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::embedding_forward"),
      Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>(exec, {0, 0},
                                                             {time * columns, static_cast<Index>(table.extent(1))}),
      KOKKOS_LAMBDA(Index r, Index e) { y(r, e) = table(tokens(r / columns, r % columns), e); });
}

void embedding_backward(const ExecutionSpace& exec, const ConstTokenMatrix& tokens, Index time, const ConstMatrix& dy,
                        const MatrixView& grad) {
  const Index columns = static_cast<Index>(tokens.extent(1));
  const Index rows = time * columns;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::embedding_backward"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(grad.extent(1))),
      KOKKOS_LAMBDA(Index e) {
        for (Index r = 0; r < rows; ++r) grad(tokens(r / columns, r % columns), e) += dy(r, e);
      });
}

}  // namespace a2sgd::nn
