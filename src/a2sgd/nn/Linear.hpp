#pragma once
/// @file Linear.hpp
/// Fully connected layer y = x W^T + b on mini-batches (one sample per row), GEMMs through
/// Kokkos Kernels (and so the BLAS it was built with).

#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Types.hpp>

namespace a2sgd::nn {

/// Activation applied after the affine map.
enum class Activation { none, relu };

/// y[B, out] = act(x[B, in] W^T + b), W row-major [out, in]. Uses the first rows(x) rows of y.
void linear_forward(const ExecutionSpace& exec, const ConstMatrix& x, const MatrixView& weight, const FloatView& bias,
                    const Matrix& y, Activation act);

/// Backward pass of linear_forward for the first `batch` rows:
///   dW = dy^T x,  db = sum over rows of dy,  dx = (dy W) * act'(x)   (dx only when non-empty).
/// `dy` must already include the derivative of this layer's activation (see relu_backward).
/// `x_activation` is the activation that produced x (relu: dx is masked by x > 0).
void linear_backward(const ExecutionSpace& exec, const ConstMatrix& x, const ConstMatrix& dy, const MatrixView& weight,
                     const MatrixView& weight_grad, const FloatView& bias_grad, const Matrix& dx,
                     Activation x_activation);

/// out[c] = sum over rows of dy[r, c], accumulated in double and rounded once (bias gradients).
void column_sums(const ExecutionSpace& exec, const ConstMatrix& dy, const FloatView& out);

}  // namespace a2sgd::nn
