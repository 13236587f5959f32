#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/Gemm.hpp>
#include <a2sgd/nn/Linear.hpp>
#include <a2sgd/nn/Lstm.hpp>

namespace a2sgd::nn {
namespace {

using Policy2 = Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>;
using Range = std::pair<Index, Index>;

Range block(Index t, Index columns) {
  return {t * columns, (t + 1) * columns};
}

// Step t's gates from its pre-activations (bias added here), then c_t and h_t.
void cell_forward(const ExecutionSpace& exec, Index t, Index columns, const Matrix& gates, const FloatView& bias,
                  const Matrix& h, const Matrix& c) {
  const Index hidden = static_cast<Index>(h.extent(1));
  const Index row0 = t * columns;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::lstm_cell_forward"), Policy2(exec, {0, 0}, {columns, hidden}),
      KOKKOS_LAMBDA(Index b, Index j) {
        const Index r = row0 + b;
        const float i = detail::sigmoid(gates(r, j) + bias(j));
        const float f = detail::sigmoid(gates(r, hidden + j) + bias(hidden + j));
        const float g = detail::tanh(gates(r, 2 * hidden + j) + bias(2 * hidden + j));
        const float o = detail::sigmoid(gates(r, 3 * hidden + j) + bias(3 * hidden + j));
        const float cell = f * c(r, j) + i * g;  // c(r, j) is c_{t-1}: block t of (T + 1)
        gates(r, j) = i;
        gates(r, hidden + j) = f;
        gates(r, 2 * hidden + j) = g;
        gates(r, 3 * hidden + j) = o;
        c(r + columns, j) = cell;
        h(r + columns, j) = o * detail::tanh(cell);
      });
}

// Step t's gate gradients; dc carries dL/dc_t from step t + 1 in and dL/dc_{t-1} out.
void cell_backward(const ExecutionSpace& exec, Index t, Index columns, const ConstMatrix& gates, const ConstMatrix& c,
                   const ConstMatrix& dh, const ConstMatrix& dh_next, const Matrix& dc, const Matrix& dgates) {
  const Index hidden = static_cast<Index>(c.extent(1));
  const Index row0 = t * columns;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::lstm_cell_backward"), Policy2(exec, {0, 0}, {columns, hidden}),
      KOKKOS_LAMBDA(Index b, Index j) {
        const Index r = row0 + b;
        const float i = gates(r, j), f = gates(r, hidden + j), g = gates(r, 2 * hidden + j),
                    o = gates(r, 3 * hidden + j);
        const float d_h = dh(r, j) + dh_next(b, j);
        const float tc = detail::tanh(c(r + columns, j));
        const float d_o = d_h * tc;
        const float d_c = d_h * o * (1.0f - tc * tc) + dc(b, j);
        const float d_i = d_c * g;
        const float d_g = d_c * i;
        const float d_f = d_c * c(r, j);
        dc(b, j) = d_c * f;
        dgates(r, j) = d_i * i * (1.0f - i);
        dgates(r, hidden + j) = d_f * f * (1.0f - f);
        dgates(r, 2 * hidden + j) = d_g * (1.0f - g * g);
        dgates(r, 3 * hidden + j) = d_o * o * (1.0f - o);
      });
}

}  // namespace

void lstm_forward(const ExecutionSpace& exec, Index columns, const ConstMatrix& x, const LstmWeights& w,
                  const LstmActivations& act) {
  const Index steps = static_cast<Index>(x.extent(0)) / columns;
  // The input projection of every step at once; the recurrent part is added step by step.
  detail::gemm(exec, "N", "T", 1.0f, x, w.w_ih, 0.0f, act.gates);
  for (Index t = 0; t < steps; ++t) {
    const auto gates_t = Kokkos::subview(act.gates, block(t, columns), Kokkos::ALL);
    detail::gemm(exec, "N", "T", 1.0f, Kokkos::subview(act.h, block(t, columns), Kokkos::ALL), w.w_hh, 1.0f, gates_t);
    cell_forward(exec, t, columns, act.gates, w.bias, act.h, act.c);
  }
}

void lstm_backward(const ExecutionSpace& exec, Index columns, const ConstMatrix& x, const LstmWeights& w,
                   const LstmActivations& act, const ConstMatrix& dh, const LstmBackwardScratch& s,
                   const LstmWeights& grads, const Matrix& dx) {
  const Index steps = static_cast<Index>(x.extent(0)) / columns;
  Kokkos::deep_copy(exec, s.dh_next, 0.0f);
  Kokkos::deep_copy(exec, s.dc, 0.0f);
  for (Index t = steps; t-- > 0;) {
    cell_backward(exec, t, columns, act.gates, act.c, dh, s.dh_next, s.dc, s.dgates);
    if (t > 0)
      detail::gemm(exec, "N", "N", 1.0f, Kokkos::subview(s.dgates, block(t, columns), Kokkos::ALL), w.w_hh, 0.0f,
                   s.dh_next);
  }
  // Weight gradients of all steps as single GEMMs: h_{t-1} of every step is rows [0, T C) of h.
  detail::gemm(exec, "T", "N", 1.0f, s.dgates, x, 0.0f, grads.w_ih);
  detail::gemm(exec, "T", "N", 1.0f, s.dgates, Kokkos::subview(act.h, Range(0, steps * columns), Kokkos::ALL), 0.0f,
               grads.w_hh);
  column_sums(exec, s.dgates, grads.bias);
  if (dx.extent(0) > 0) detail::gemm(exec, "N", "N", 1.0f, s.dgates, w.w_ih, 0.0f, dx);
}

}  // namespace a2sgd::nn
