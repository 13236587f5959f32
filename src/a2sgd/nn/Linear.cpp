#include <a2sgd/nn/Linear.hpp>

#include <a2sgd/core/impl/Gemm.hpp>

namespace a2sgd::nn {
namespace {

using Policy2 = Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>;

// Free functions rather than lambdas in members: nvcc rejects extended lambdas in some scopes.
void add_bias_activate(const ExecutionSpace& exec, const Matrix& y, const FloatView& bias, Activation act) {
  const bool relu = act == Activation::relu;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::bias_activation"),
      Policy2(exec, {0, 0}, {static_cast<Index>(y.extent(0)), static_cast<Index>(y.extent(1))}),
      KOKKOS_LAMBDA(Index r, Index c) {
        const float v = y(r, c) + bias(c);
        y(r, c) = relu && v < 0.0f ? 0.0f : v;
      });
}

void relu_mask(const ExecutionSpace& exec, const Matrix& dx, const ConstMatrix& x) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::relu_backward"),
      Policy2(exec, {0, 0}, {static_cast<Index>(dx.extent(0)), static_cast<Index>(dx.extent(1))}),
      KOKKOS_LAMBDA(Index r, Index c) {
        if (!(x(r, c) > 0.0f)) dx(r, c) = 0.0f;
      });
}

}  // namespace

void column_sums(const ExecutionSpace& exec, const ConstMatrix& dy, const FloatView& out) {
  const Index rows = static_cast<Index>(dy.extent(0));
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::bias_grad"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(dy.extent(1))),
      KOKKOS_LAMBDA(Index c) {
        double s = 0.0;
        for (Index r = 0; r < rows; ++r) s += dy(r, c);
        out(c) = static_cast<float>(s);
      });
}

void linear_forward(const ExecutionSpace& exec, const ConstMatrix& x, const MatrixView& weight, const FloatView& bias,
                    const Matrix& y, Activation act) {
  detail::gemm(exec, "N", "T", 1.0f, x, weight, 0.0f, y);
  add_bias_activate(exec, y, bias, act);
}

void linear_backward(const ExecutionSpace& exec, const ConstMatrix& x, const ConstMatrix& dy, const MatrixView& weight,
                     const MatrixView& weight_grad, const FloatView& bias_grad, const Matrix& dx,
                     Activation x_activation) {
  detail::gemm(exec, "T", "N", 1.0f, dy, x, 0.0f, weight_grad);
  column_sums(exec, dy, bias_grad);
  if (dx.extent(0) == 0) return;
  detail::gemm(exec, "N", "N", 1.0f, dy, weight, 0.0f, dx);
  if (x_activation == Activation::relu) relu_mask(exec, dx, x);
}

}  // namespace a2sgd::nn
