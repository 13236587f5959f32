#pragma once
/// @file ParameterStore.hpp
/// All parameters of a model in one contiguous View, all gradients in a second one; every
/// tensor is a named slice of both. Exchanges and optimizers work on the whole flat buffer in
/// one pass, whatever the number of layers.

#include <a2sgd/core/Types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace a2sgd {

/// A named tensor inside the flat buffers.
struct TensorInfo {
  std::string name;
  std::vector<Index> shape;
  Index offset = 0;  ///< first element in the flat buffers
  Index size = 0;    ///< product of shape
};

/// Row-major 2-D view of a tensor slice (e.g. a weight matrix), not owning its memory.
using MatrixView = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Flat parameter and gradient buffers with named tensor slices.
///
/// Usage: add() every tensor, then allocate() once; afterwards the layout is frozen.
class ParameterStore {
 public:
  /// Registers a tensor of the given shape (every extent >= 1) and returns its index.
  /// Throws InvalidArgument for a duplicate or empty name, a non-positive extent, or after allocate().
  std::size_t add(std::string name, std::vector<Index> shape);

  /// Allocates the zero-initialised flat buffers "a2sgd::params" and "a2sgd::grads".
  void allocate();

  bool allocated() const noexcept { return m_size_frozen; }
  /// Total number of parameters n.
  Index size() const noexcept { return m_size; }
  std::size_t num_tensors() const noexcept { return m_tensors.size(); }
  const std::vector<TensorInfo>& tensors() const noexcept { return m_tensors; }
  const TensorInfo& info(std::size_t index) const;
  const TensorInfo& info(std::string_view name) const;
  std::size_t index_of(std::string_view name) const;

  /// The whole flat buffers (n values each).
  const FloatView& params() const;
  const FloatView& grads() const;

  /// One tensor's slice of the flat buffers.
  FloatView param(std::size_t index) const;
  FloatView grad(std::size_t index) const;
  FloatView param(std::string_view name) const { return param(index_of(name)); }
  FloatView grad(std::string_view name) const { return grad(index_of(name)); }

  /// Rank-2 tensors as row-major matrices over the same memory.
  MatrixView param_matrix(std::size_t index) const;
  MatrixView grad_matrix(std::size_t index) const;

  /// The same slices of any other flat buffer with this layout (n values), e.g. an averaged
  /// model or a received replica.
  FloatView slice(const FloatView& flat, std::size_t index) const;
  MatrixView matrix(const FloatView& flat, std::size_t index) const;

  /// Sets every gradient to zero.
  void zero_grads(const ExecutionSpace& exec = ExecutionSpace()) const;

  /// A stable textual description of the layout, e.g. "fc1.weight[256,784];fc1.bias[256]".
  std::string describe() const;

 private:
  void require_allocated(const char* what) const;
  void require_layout(const FloatView& flat) const;

  std::vector<TensorInfo> m_tensors;
  Index m_size = 0;
  bool m_size_frozen = false;
  FloatView m_params;
  FloatView m_grads;
};

}  // namespace a2sgd
