#pragma once
/// @file Lstm.hpp
/// One LSTM layer over a whole batch of time steps (truncated back-propagation through time).
///
/// Rows are time-major: row t * C + c is time step t of column c (C columns). Gate order i, f, g, o
/// (PyTorch's): pre = x W_ih^T + h W_hh^T + b; i, f, o = sigmoid, g = tanh;
/// c_t = f c_{t-1} + i g; h_t = o tanh(c_t). The input projection of all time steps is one GEMM;
/// only the recurrent GEMM runs per step. The backward pass computes the gate gradients of all
/// steps first and then the weight gradients and the input gradient as single GEMMs.

#include <a2sgd/core/ParameterStore.hpp>

namespace a2sgd::nn {

/// A layer's parameters (or their gradients): W_ih [4H, in], W_hh [4H, H], b [4H].
struct LstmWeights {
  MatrixView w_ih;
  MatrixView w_hh;
  FloatView bias;
};

/// The activations a layer keeps for its backward pass.
struct LstmActivations {
  Matrix gates;  ///< [T C, 4H]: the activated gates i, f, g, o of every step
  Matrix h;      ///< [(T + 1) C, H]: block 0 the initial hidden state, block t + 1 step t's output
  Matrix c;      ///< [(T + 1) C, H]: the same for the cell state
};

/// Forward pass over T = x.extent(0) / columns steps. Blocks 0 of `act.h` and `act.c` must hold
/// the initial state; the outputs h_t are rows [C, (T + 1) C) of act.h.
void lstm_forward(const ExecutionSpace& exec, Index columns, const ConstMatrix& x, const LstmWeights& weights,
                  const LstmActivations& act);

/// Scratch space of lstm_backward.
struct LstmBackwardScratch {
  Matrix dgates;   ///< [T C, 4H]
  Matrix dh_next;  ///< [C, H]
  Matrix dc;       ///< [C, H]
};

/// Backward pass: `dh` [T C, H] is the gradient of the loss with respect to the outputs h_t (no
/// gradient flows into the initial state: the graph is cut at the batch boundary). Overwrites
/// `grads` and, when it is not empty, `dx` [T C, in].
void lstm_backward(const ExecutionSpace& exec, Index columns, const ConstMatrix& x, const LstmWeights& weights,
                   const LstmActivations& act, const ConstMatrix& dh, const LstmBackwardScratch& scratch,
                   const LstmWeights& grads, const Matrix& dx);

}  // namespace a2sgd::nn
