#include <a2sgd/compress/impl/LowRank.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

#include <a2sgd/core/Error.hpp>

#include <algorithm>
#include <string>
#include <type_traits>

namespace a2sgd::compress::impl {
namespace {

// f(i) for i in [0, n) on a host execution space; device builds never call these kernels (a
// template, so that a device build does not compile the host lambdas for its space).
template <class Exec, class F>
void host_for(const Exec& exec, const std::string& label, Index n, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible)
    Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<Index>>(exec, 0, n), f);
  else
    throw InvalidArgument("powersgd: the host low-rank kernels were called on a device execution space");
}

// The kernels take a block of R = 8 rows of m at once against two rows of qt (factors k, k + 1;
// an odd last factor is paired with itself): each load of qt then serves eight rows. With one row
// at a time, the two loads of qt per load of m, not memory, bounded the product on a Zen 4 core.
constexpr int block_rows = 8;
constexpr int lanes = 16;  // partial sums per dot product: independent FMA chains
#ifndef ROWPF
#define ROWPF 8192
#endif
constexpr std::uintptr_t row_prefetch = ROWPF;

// out[2x + c] = m[x] . q_c for the R rows x of the block (rows `cols` apart).
template <int R>
A2SGD_HOST_CLONES void project_block(const float* m, Index cols, const float* q0, const float* q1, float* out) {
  float s[2 * R][lanes] = {};
  Index j = 0;
  for (; j + lanes <= cols; j += lanes) {
    if (j % 32 == 0)
      for (int x = 0; x < R; ++x) a2sgd::impl::prefetch_chunk<false, row_prefetch>(m + x * cols + j);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int l = 0; l < lanes; ++l) {
      const float a = q0[j + l], b = q1[j + l];
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) {
        const float v = m[x * cols + j + l];
        s[2 * x][l] += v * a;
        s[2 * x + 1][l] += v * b;
      }
    }
  }
  for (int x = 0; x < R; ++x) {
    float t0 = 0.0f, t1 = 0.0f;
    for (Index jj = j; jj < cols; ++jj) t0 += m[x * cols + jj] * q0[jj], t1 += m[x * cols + jj] * q1[jj];
    for (int l = 0; l < lanes; ++l) t0 += s[2 * x][l], t1 += s[2 * x + 1][l];
    out[2 * x] = t0;
    out[2 * x + 1] = t1;
  }
}

template <int R>
void project_rows(const float* m, Index cols, const float* qt, int r, float* p) {
  float out[2 * R];
  for (int k = 0; k < r; k += 2) {
    const int k1 = k + 1 < r ? k + 1 : k;
    project_block<R>(m, cols, qt + k * cols, qt + k1 * cols, out);
    for (int x = 0; x < R; ++x) {
      p[x * r + k] = out[2 * x];
      p[x * r + k1] = out[2 * x + 1];
    }
  }
}

// q0[j] += sum_x p[x][k] m[x][j] and q1[j] += sum_x p[x][k1] m[x][j] for the block's R rows and
// the columns [0, len) of the slice (q1 == q0: one factor).
template <int R, bool Two>
A2SGD_HOST_CLONES void back_project_block(const float* m, Index cols, Index len, const float* p, int r, int k, int k1,
                                          float* q0, float* q1) {
  float a[R], b[R];
  for (int x = 0; x < R; ++x) a[x] = p[x * r + k], b[x] = p[x * r + k1];
  // Chunks of 32 columns, each prefetching the block's rows ahead (Prefetch.hpp); the same sums.
  for (Index j0 = 0; j0 < len; j0 += 32) {
    const Index j1 = j0 + 32 < len ? j0 + 32 : len;
    for (int x = 0; x < R; ++x) a2sgd::impl::prefetch_chunk<false, row_prefetch>(m + x * cols + j0);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (Index j = j0; j < j1; ++j) {
      float s0 = q0[j], s1 = Two ? q1[j] : 0.0f;
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) {
        const float v = m[x * cols + j];
        s0 += a[x] * v;
        if (Two) s1 += b[x] * v;
      }
      q0[j] = s0;
      if (Two) q1[j] = s1;
    }
  }
}

template <int R>
void back_project_rows(const float* m, Index cols, Index len, const float* p, int r, float* qt) {
  int k = 0;
  for (; k + 2 <= r; k += 2)
    back_project_block<R, true>(m, cols, len, p, r, k, k + 1, qt + k * cols, qt + (k + 1) * cols);
  if (k < r) back_project_block<R, false>(m, cols, len, p, r, k, k, qt + k * cols, qt + k * cols);
}

// qt[k][j0 .. j0 + len) = sum_i p[i][k] m[i][j0 .. j0 + len)
void back_project_columns(const float* m, Index rows, Index cols, Index j0, Index len, const float* p, int r,
                          float* qt) {
  for (int k = 0; k < r; ++k) std::fill(qt + k * cols + j0, qt + k * cols + j0 + len, 0.0f);
  Index i = 0;
  for (; i + block_rows <= rows; i += block_rows)
    back_project_rows<block_rows>(m + i * cols + j0, cols, len, p + i * r, r, qt + j0);
  for (; i < rows; ++i) back_project_rows<1>(m + i * cols + j0, cols, len, p + i * r, r, qt + j0);
}

// u[x][j] (+)= p[x][k] q0[j] + p[x][k1] q1[j] for the block's R rows (q1 == q0 with Two false).
template <int R, bool Two, bool Accumulate>
A2SGD_HOST_CLONES void expand_block(const float* p, int r, int k, int k1, const float* q0, const float* q1, Index cols,
                                    float* u) {
  float a[R], b[R];
  for (int x = 0; x < R; ++x) a[x] = p[x * r + k], b[x] = p[x * r + k1];
  // Chunks of 32 columns, each prefetching the block's rows of u ahead (Prefetch.hpp).
  for (Index j0 = 0; j0 < cols; j0 += 32) {
    const Index j1 = j0 + 32 < cols ? j0 + 32 : cols;
    for (int x = 0; x < R; ++x) a2sgd::impl::prefetch_chunk<true, row_prefetch>(u + x * cols + j0);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (Index j = j0; j < j1; ++j) {
      const float c0 = q0[j], c1 = Two ? q1[j] : 0.0f;
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) {
        const float v = Two ? a[x] * c0 + b[x] * c1 : a[x] * c0;
        if constexpr (Accumulate)
          u[x * cols + j] += v;
        else
          u[x * cols + j] = v;
      }
    }
  }
}

template <int R>
void expand_rows(const float* p, const float* qt, Index cols, int r, float* u) {
  if (r == 1) {
    expand_block<R, false, false>(p, r, 0, 0, qt, qt, cols, u);
    return;
  }
  expand_block<R, true, false>(p, r, 0, 1, qt, qt + cols, cols, u);  // factors 0 and 1 store, the rest add
  int k = 2;
  for (; k + 2 <= r; k += 2) expand_block<R, true, true>(p, r, k, k + 1, qt + k * cols, qt + (k + 1) * cols, cols, u);
  if (k < r) expand_block<R, false, true>(p, r, k, k, qt + k * cols, qt + k * cols, cols, u);
}

// Rows per work item: whole blocks of rows, enough that the per-ISA call costs nothing.
Index row_block(Index cols) {
  return block_rows * std::max<Index>(1, 16384 / (block_rows * std::max<Index>(1, cols)));
}

// rows_of(std::integral_constant<int, R>, i) for every block of R rows from row i: blocks of
// block_rows, then the last rows one by one.
template <class RowsOf>
void for_row_blocks(const ExecutionSpace& exec, const std::string& label, Index rows, Index cols,
                    const RowsOf& rows_of) {
  const Index block = row_block(cols);
  host_for(exec, label, (rows + block - 1) / block, [=](Index b) {
    const Index end = std::min(rows, (b + 1) * block);
    Index i = b * block;
    for (; i + block_rows <= end; i += block_rows) rows_of(std::integral_constant<int, block_rows>(), i);
    for (; i < end; ++i) rows_of(std::integral_constant<int, 1>(), i);
  });
}

}  // namespace

void low_rank_project(const ExecutionSpace& exec, const float* m, Index rows, Index cols, const float* qt, int r,
                      float* p) {
  for_row_blocks(exec, A2SGD_LABEL("a2sgd::compress::powersgd_project"), rows, cols, [=](auto block, Index i) {
    project_rows<decltype(block)::value>(m + i * cols, cols, qt, r, p + i * r);
  });
}

void low_rank_back_project(const ExecutionSpace& exec, const float* m, Index rows, Index cols, const float* p, int r,
                           float* qt) {
  // Column blocks: one per thread at least, and no wider than keeps r rows of qt in L2 (256 KB).
  const auto threads = static_cast<Index>(std::max(1, exec.concurrency()));
  const Index width = std::max<Index>(256, std::min<Index>(65536 / r, (cols + threads - 1) / threads));
  host_for(exec, A2SGD_LABEL("a2sgd::compress::powersgd_back_project"), (cols + width - 1) / width, [=](Index c) {
    const Index j0 = c * width;
    back_project_columns(m, rows, cols, j0, std::min(width, cols - j0), p, r, qt);
  });
}

void low_rank_expand(const ExecutionSpace& exec, const float* p, const float* qt, Index rows, Index cols, int r,
                     float* u) {
  for_row_blocks(exec, A2SGD_LABEL("a2sgd::compress::powersgd_expand"), rows, cols, [=](auto block, Index i) {
    expand_rows<decltype(block)::value>(p + i * r, qt, cols, r, u + i * cols);
  });
}

void transpose_thin(const ExecutionSpace& exec, const float* q, Index cols, int r, float* qt) {
  host_for(exec, A2SGD_LABEL("a2sgd::compress::powersgd_transpose"), cols, [=](Index j) {
    for (int k = 0; k < r; ++k) qt[k * cols + j] = q[j * r + k];
  });
}

void untranspose_thin(const ExecutionSpace& exec, const float* qt, Index cols, int r, float* q) {
  host_for(exec, A2SGD_LABEL("a2sgd::compress::powersgd_transpose"), cols, [=](Index j) {
    for (int k = 0; k < r; ++k) q[j * r + k] = qt[k * cols + j];
  });
}

}  // namespace a2sgd::compress::impl
