#pragma once
/// @file Embedding.hpp
/// Token embedding lookup and its gradient, on time-major rows r = t * columns + c.

#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/nn/Model.hpp>

namespace a2sgd::nn {

/// y[t * C + c, :] = table[tokens(t, c), :] for t < time (C = tokens.extent(1)).
void embedding_forward(const ExecutionSpace& exec, const ConstTokenMatrix& tokens, Index time, const MatrixView& table,
                       const Matrix& y);

/// grad[tokens(t, c), :] += dy[t * C + c, :] for t < time, adding the rows in order: one thread
/// per embedding column, so the result is the same on every run and backend (no atomics).
void embedding_backward(const ExecutionSpace& exec, const ConstTokenMatrix& tokens, Index time, const ConstMatrix& dy,
                        const MatrixView& grad);

}  // namespace a2sgd::nn
