#pragma once
/// @file Types.hpp
/// Execution/memory spaces and View aliases used throughout a2sgd.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

/// A kernel label as a std::string built once per call site. Kokkos takes labels as
/// `const std::string&`, so a literal longer than the small-string buffer would cost a heap
/// allocation at every launch; steady-state steps allocate nothing (tests/test_allocations.cpp).
#define A2SGD_LABEL(text)                        \
  ([]() -> const std::string& {                  \
    static const std::string a2sgd_label_(text); \
    return a2sgd_label_;                         \
  }())

namespace a2sgd {

/// Execution space of all a2sgd kernels (the Kokkos default: CUDA/HIP/OpenMP/Serial).
using ExecutionSpace = Kokkos::DefaultExecutionSpace;
/// Memory space in which parameters, gradients and per-rank state live.
using MemorySpace = ExecutionSpace::memory_space;

/// Float32 model data on the device.
using FloatView = Kokkos::View<float*, MemorySpace>;
using ConstFloatView = Kokkos::View<const float*, MemorySpace>;

/// Row-major float32 matrices (a mini-batch of activations: one sample per row).
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
using ConstMatrix = Kokkos::View<const float**, Kokkos::LayoutRight, MemorySpace>;
/// Class labels.
using LabelView = Kokkos::View<int*, MemorySpace>;
using ConstLabelView = Kokkos::View<const int*, MemorySpace>;

/// Index type of flat buffers (models beyond 2^31 parameters are expected).
using Index = std::int64_t;

/// The range policy of a2sgd's one-dimensional kernels: ExecutionSpace with 64-bit indices.
using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

/// How a piece of per-rank state is carried into a run with a different number of ranks.
enum class StateMerge {
  conserve_sum,  ///< each new rank gets (sum over old ranks) / p_new: e.g. error-feedback residuals
  mean,          ///< each new rank gets the mean over old ranks: e.g. a state shared by all ranks
};

/// A named piece of per-rank state (residual, momentum, ...), as saved in checkpoints. Its
/// length is the method's choice (n for a residual, smaller for e.g. PowerSGD's Q matrices).
struct NamedView {
  std::string name;
  FloatView view;
  StateMerge merge = StateMerge::conserve_sum;
};

/// True when the host can dereference a2sgd's device views (no staging copy needed for MPI).
inline constexpr bool host_accessible_memory = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible;

/// True when ExecutionSpace runs on the host (Serial, OpenMP, Threads): kernels then take blocks
/// per work item and the per-ISA host loops of core/impl/HostClones.hpp.
inline constexpr bool host_backend = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;

}  // namespace a2sgd
