#pragma once
// PowerSGD's three products of a gradient matrix with its thin factors on host backends
// (internal): P = M Q, Q = M^T P and U = P Q^T for a rows x cols matrix M and rank r.
//
// With r of 1 to 4 these products read or write M once and do 2r flops per entry of it: memory
// passes, not GEMMs. A general GEMM packs M into panels first (another read and write of M); these
// kernels stream M once, as SIMD loops compiled per ISA. Device backends keep the vendor BLAS (detail::gemm), which
// does not pack thin products.
//
// Q is handed over transposed, as Qt (r x cols, row-major): a row of M then meets r contiguous
// rows of Qt, and every loop runs along a contiguous row. Sums are in float in any order (the
// rounding bound of tests/test_powersgd.cpp holds for any order).

#include <a2sgd/core/Types.hpp>

namespace a2sgd::compress::impl {

/// p (rows x r, row-major) = m (rows x cols) qt^T.
void low_rank_project(const ExecutionSpace& exec, const float* m, Index rows, Index cols, const float* qt, int r,
                      float* p);

/// qt (r x cols) = p^T m: column block by column block, each walking all rows of m with its slice
/// of qt held in cache.
void low_rank_back_project(const ExecutionSpace& exec, const float* m, Index rows, Index cols, const float* p, int r,
                           float* qt);

/// u (rows x cols) = p qt.
void low_rank_expand(const ExecutionSpace& exec, const float* p, const float* qt, Index rows, Index cols, int r,
                     float* u);

/// qt (r x cols) = q^T for q (cols x r), and back.
void transpose_thin(const ExecutionSpace& exec, const float* q, Index cols, int r, float* qt);
void untranspose_thin(const ExecutionSpace& exec, const float* qt, Index cols, int r, float* q);

}  // namespace a2sgd::compress::impl
