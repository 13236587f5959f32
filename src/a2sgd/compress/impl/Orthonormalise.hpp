#pragma once
// Orthonormal columns for PowerSGD's P blocks (internal).

#include <a2sgd/core/Types.hpp>

namespace a2sgd::compress::impl {

/// Several row-major `rows x r` matrices inside one flat float buffer (PowerSGD's P payload):
/// block b starts at offset(b) and has rows(b) rows, all share the column count r.
struct ColumnBlocks {
  Kokkos::View<Index*, MemorySpace> offset;
  Kokkos::View<Index*, MemorySpace> rows;
  int r = 0;
};

/// Replaces the columns of every block by orthonormal columns spanning the same space, in one
/// kernel launch (one team per block): modified Gram-Schmidt run twice over the earlier columns
/// ("twice is enough": the loss of orthogonality then no longer grows with the condition number),
/// every dot product and update in double, each stored value rounded to float once. Measured
/// against float32 storage this leaves |P^T P - I| of a few units of float rounding whatever the
/// conditioning (tests/test_powersgd.cpp states the bound).
///
/// A column that is exactly zero after the projections (a rank-deficient block) stays zero; a
/// column with a NaN or Inf becomes all NaN, so that the non-finite gradient reaches every rank's
/// update.
void orthonormalise_columns(const ExecutionSpace& exec, const FloatView& data, const ColumnBlocks& blocks);

}  // namespace a2sgd::compress::impl
