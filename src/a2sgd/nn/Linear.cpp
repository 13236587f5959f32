#include <a2sgd/nn/Linear.hpp>

#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/impl/Gemm.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

namespace a2sgd::nn {
namespace {

using Policy2 = Kokkos::MDRangePolicy<ExecutionSpace, Kokkos::Rank<2>>;

// Free functions rather than lambdas in members: nvcc rejects extended lambdas in some scopes.
// Every row of y set to the bias: the GEMM then accumulates onto it (beta = 1), so the bias costs
// the write that a beta = 0 GEMM spends on clearing y anyway, not a second pass over y.
void broadcast_bias(const ExecutionSpace& exec, const Matrix& y, const FloatView& bias) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::bias_broadcast"),
      Policy2(exec, {0, 0}, {static_cast<Index>(y.extent(0)), static_cast<Index>(y.extent(1))}),
      KOKKOS_LAMBDA(Index r, Index c) { y(r, c) = bias(c); });
}

// Element-wise over the matrices' contiguous storage (their rows are the leading rows of
// LayoutRight buffers): selects instead of conditional stores, one SIMD loop compiled per ISA on
// host backends (core/impl/HostClones.hpp). NaN stays NaN in relu (NaN < 0 is false) and clears
// the gradient in relu_mask (NaN > 0 is false), as the conditional forms did.
void relu(const ExecutionSpace& exec, const Matrix& y) {
  if (!y.span_is_contiguous()) throw Error("relu: the activations are not contiguous");
  float* v = y.data();
  impl::simd_parallel_for(
      A2SGD_LABEL("a2sgd::nn::relu"), exec, 0, static_cast<Index>(y.size()), KOKKOS_LAMBDA(Index i) {
        const float a = v[i];
        v[i] = a < 0.0f ? 0.0f : a;
      });
}

void relu_mask(const ExecutionSpace& exec, const Matrix& dx, const ConstMatrix& x) {
  if (!dx.span_is_contiguous() || !x.span_is_contiguous() || dx.size() != x.size())
    throw Error("relu_mask: the gradients and activations are not contiguous matrices of one shape");
  float* d = dx.data();
  const float* a = x.data();
  impl::simd_parallel_for(
      A2SGD_LABEL("a2sgd::nn::relu_backward"), exec, 0, static_cast<Index>(dx.size()),
      KOKKOS_LAMBDA(Index i) { d[i] = a[i] > 0.0f ? d[i] : 0.0f; });
}

}  // namespace

namespace {

constexpr Index column_block = 256;

// Host backends: rows streamed in order into a block of column accumulators, so the inner loop runs
// along contiguous memory and vectorises (compiled per ISA, core/impl/HostClones.hpp). Each column
// still adds its rows in order 0, 1, ..., so the sums equal the one-column-per-thread kernel's bit
// for bit.
A2SGD_HOST_CLONES void column_block_sums(const float* dy, Index stride, Index rows, Index count, float* out) {
  double acc[column_block];
  for (Index c = 0; c < count; ++c) acc[c] = 0.0;
  for (Index r = 0; r < rows; ++r) {
    const float* row = dy + r * stride;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (Index c = 0; c < count; ++c) acc[c] += static_cast<double>(row[c]);
  }
  for (Index c = 0; c < count; ++c) out[c] = static_cast<float>(acc[c]);
}

// A template so that device builds never instantiate the host branch (it calls ISA clones).
template <bool HostBackend>
void column_sums_on(const ExecutionSpace& exec, const ConstMatrix& dy, const FloatView& out) {
  const Index rows = static_cast<Index>(dy.extent(0)), cols = static_cast<Index>(dy.extent(1));
  if constexpr (HostBackend) {
    const Index stride = static_cast<Index>(dy.stride_0());
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::nn::bias_grad"), Policy(exec, 0, (cols + column_block - 1) / column_block),
                         [=](Index b) {
                           const Index c0 = b * column_block;
                           const Index count = c0 + column_block < cols ? column_block : cols - c0;
                           column_block_sums(dy.data() + c0, stride, rows, count, out.data() + c0);
                         });
  } else {
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::nn::bias_grad"), Policy(exec, 0, cols), KOKKOS_LAMBDA(Index c) {
          double s = 0.0;
          for (Index r = 0; r < rows; ++r) s += dy(r, c);
          out(c) = static_cast<float>(s);
        });
  }
}

}  // namespace

void column_sums(const ExecutionSpace& exec, const ConstMatrix& dy, const FloatView& out) {
  if (dy.extent(1) == 0) return;
  column_sums_on<host_backend>(exec, dy, out);
}

void linear_forward(const ExecutionSpace& exec, const ConstMatrix& x, const MatrixView& weight, const FloatView& bias,
                    const Matrix& y, Activation act) {
  broadcast_bias(exec, y, bias);
  detail::gemm(exec, "N", "T", 1.0f, x, weight, 1.0f, y);
  if (act == Activation::relu) relu(exec, y);
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
