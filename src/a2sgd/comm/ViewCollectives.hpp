#pragma once
/// @file ViewCollectives.hpp
/// Collectives on whole Kokkos views, staged through host memory when MPI cannot read the
/// view's memory space (no GPU-aware MPI).

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/Types.hpp>

namespace a2sgd {

/// Broadcasts `view` from `root` to every rank (collective).
void broadcast_view(const Communicator& comm, const FloatView& view, int root, StepStats* stats = nullptr);

/// In-place sum over ranks of `view` (collective).
void allreduce_view(const Communicator& comm, const FloatView& view, StepStats* stats = nullptr);

}  // namespace a2sgd
