#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/Gemm.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/nn/Linear.hpp>
#include <a2sgd/nn/Lstm.hpp>

namespace a2sgd::nn {
namespace {

using Policy2 = Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>;
using Range = std::pair<Index, Index>;

Range block(Index t, Index columns) {
  return {t * columns, (t + 1) * columns};
}

// The cell's element-wise math, shared by the host and device kernels: step t's gates from their
// pre-activations (bias added here), then c_t and h_t; and the gate gradients, where dc carries
// dL/dc_t from step t + 1 in and dL/dc_{t-1} out. Gate order i, f, g, o; `hidden` is H.
KOKKOS_INLINE_FUNCTION void cell_forward_entry(float* gates, const float* bias, float c_prev, float& c_next,
                                               float& h_next, Index hidden, Index j) {
  const float i = detail::sigmoid(gates[j] + bias[j]);
  const float f = detail::sigmoid(gates[hidden + j] + bias[hidden + j]);
  const float g = detail::tanh(gates[2 * hidden + j] + bias[2 * hidden + j]);
  const float o = detail::sigmoid(gates[3 * hidden + j] + bias[3 * hidden + j]);
  const float cell = f * c_prev + i * g;
  gates[j] = i;
  gates[hidden + j] = f;
  gates[2 * hidden + j] = g;
  gates[3 * hidden + j] = o;
  c_next = cell;
  h_next = o * detail::tanh(cell);
}

KOKKOS_INLINE_FUNCTION void cell_backward_entry(const float* gates, float c_prev, float c_next, float d_h, float& dc,
                                                float* dgates, Index hidden, Index j) {
  const float i = gates[j], f = gates[hidden + j], g = gates[2 * hidden + j], o = gates[3 * hidden + j];
  const float tc = detail::tanh(c_next);
  const float d_o = d_h * tc;
  const float d_c = d_h * o * (1.0f - tc * tc) + dc;
  const float d_i = d_c * g;
  const float d_g = d_c * i;
  const float d_f = d_c * c_prev;
  dc = d_c * f;
  dgates[j] = d_i * i * (1.0f - i);
  dgates[hidden + j] = d_f * f * (1.0f - f);
  dgates[2 * hidden + j] = d_g * (1.0f - g * g);
  dgates[3 * hidden + j] = d_o * o * (1.0f - o);
}

// Host backends: one column's row of H entries per call, compiled per ISA (core/impl/HostClones.hpp)
// so that the branch-free sigmoid and tanh run 8 or 16 lanes wide.
A2SGD_HOST_CLONES void cell_forward_row(float* gates, const float* bias, const float* c_prev, float* c_next,
                                        float* h_next, Index hidden) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (Index j = 0; j < hidden; ++j) cell_forward_entry(gates, bias, c_prev[j], c_next[j], h_next[j], hidden, j);
}

A2SGD_HOST_CLONES void cell_backward_row(const float* gates, const float* c_prev, const float* c_next, const float* dh,
                                         const float* dh_next, float* dc, float* dgates, Index hidden) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (Index j = 0; j < hidden; ++j)
    cell_backward_entry(gates, c_prev[j], c_next[j], dh[j] + dh_next[j], dc[j], dgates, hidden, j);
}

// Step t of the forward cell; c(r, j) is c_{t-1} (block t of T + 1), c(r + C, j) receives c_t.
// A template so that device builds never instantiate the host branch (it calls ISA clones).
template <bool HostBackend>
void cell_forward(const ExecutionSpace& exec, Index t, Index columns, const Matrix& gates, const FloatView& bias,
                  const Matrix& h, const Matrix& c) {
  const Index hidden = static_cast<Index>(h.extent(1));
  const Index row0 = t * columns;
  if constexpr (HostBackend) {
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::nn::lstm_cell_forward"),
                         Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, columns), [=](Index b) {
                           const Index r = row0 + b;
                           cell_forward_row(&gates(r, 0), bias.data(), &c(r, 0), &c(r + columns, 0), &h(r + columns, 0),
                                            hidden);
                         });
  } else {
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::nn::lstm_cell_forward"), Policy2(exec, {0, 0}, {columns, hidden}),
        KOKKOS_LAMBDA(Index b, Index j) {
          const Index r = row0 + b;
          cell_forward_entry(&gates(r, 0), bias.data(), c(r, j), c(r + columns, j), h(r + columns, j), hidden, j);
        });
  }
}

template <bool HostBackend>
void cell_backward(const ExecutionSpace& exec, Index t, Index columns, const ConstMatrix& gates, const ConstMatrix& c,
                   const ConstMatrix& dh, const ConstMatrix& dh_next, const Matrix& dc, const Matrix& dgates) {
  const Index hidden = static_cast<Index>(c.extent(1));
  const Index row0 = t * columns;
  if constexpr (HostBackend) {
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::nn::lstm_cell_backward"),
                         Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, columns), [=](Index b) {
                           const Index r = row0 + b;
                           cell_backward_row(&gates(r, 0), &c(r, 0), &c(r + columns, 0), &dh(r, 0), &dh_next(b, 0),
                                             &dc(b, 0), &dgates(r, 0), hidden);
                         });
  } else {
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::nn::lstm_cell_backward"), Policy2(exec, {0, 0}, {columns, hidden}),
        KOKKOS_LAMBDA(Index b, Index j) {
          const Index r = row0 + b;
          cell_backward_entry(&gates(r, 0), c(r, j), c(r + columns, j), dh(r, j) + dh_next(b, j), dc(b, j),
                              &dgates(r, 0), hidden, j);
        });
  }
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
    cell_forward<host_backend>(exec, t, columns, act.gates, w.bias, act.h, act.c);
  }
}

void lstm_backward(const ExecutionSpace& exec, Index columns, const ConstMatrix& x, const LstmWeights& w,
                   const LstmActivations& act, const ConstMatrix& dh, const LstmBackwardScratch& s,
                   const LstmWeights& grads, const Matrix& dx) {
  const Index steps = static_cast<Index>(x.extent(0)) / columns;
  Kokkos::deep_copy(exec, s.dh_next, 0.0f);
  Kokkos::deep_copy(exec, s.dc, 0.0f);
  for (Index t = steps; t-- > 0;) {
    cell_backward<host_backend>(exec, t, columns, act.gates, act.c, dh, s.dh_next, s.dc, s.dgates);
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
