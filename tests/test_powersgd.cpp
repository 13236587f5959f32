#include "MethodTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/compress/PowerSgdExchange.hpp>
#include <a2sgd/compress/impl/LowRank.hpp>
#include <a2sgd/compress/impl/Orthonormalise.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <limits>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

std::vector<TensorInfo> layout() {
  ParameterStore store;
  store.add("w1", {40, 30});
  store.add("b1", {7});
  store.add("w2", {16, 4, 16});  // seen as a 16 x 64 matrix
  store.add("small", {2, 2});    // r (2 + 2) >= 4 for r >= 1: exchanged dense
  return store.tensors();
}

// U V^T with U shared by all ranks, so the ranks' mean has rank <= r. V = Vs A + D: Vs shared
// and fixed, A (r x r, near I) shared but new each step, D per rank and step. The row space of
// the mean moves from step to step by about |D| / sqrt(p), as a training gradient's does, so the
// warm-started Q stays at a small angle to it and the power step is well conditioned.
void low_rank(std::vector<float>& g, Index offset, Index rows, Index cols, int r, int step, int rank) {
  Rng shared(42 + static_cast<std::uint64_t>(offset)), mix(1000 + static_cast<std::uint64_t>(step)),
      mine(derive_seed(static_cast<std::uint64_t>(offset), static_cast<std::uint64_t>(100 * step + rank)));
  std::vector<double> u(rows * r), vs(cols * r), a(r * r), v(cols * r, 0.0);
  for (auto& x : u) x = shared.normal();
  for (auto& x : vs) x = shared.normal();
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < r; ++j) a[i * r + j] = (i == j) + 0.3 * mix.normal();
  for (Index j = 0; j < cols; ++j)
    for (int c = 0; c < r; ++c) {
      for (int k = 0; k < r; ++k) v[j * r + c] += vs[j * r + k] * a[k * r + c];
      v[j * r + c] += 0.3 * mine.normal();
    }
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int c = 0; c < r; ++c) s += u[i * r + c] * v[j * r + c];
      g[offset + i * cols + j] = static_cast<float>(s);
    }
}

}  // namespace

TEST_CASE("PowerSGD splits the layout into compressed matrices and dense tensors; bytes per step", "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  PowerSgdOptions o;
  o.rank = 2;
  PowerSgdExchange ex(comm, lay, o);
  const Index n = ex.size();
  CHECK(n == 40 * 30 + 7 + 16 * 64 + 4);
  REQUIRE(ex.blocks().size() == 2);
  CHECK(ex.blocks()[1].rows == 16);
  CHECK(ex.blocks()[1].cols == 64);
  REQUIRE(ex.dense_slices().size() == 2);
  CHECK(ex.p_payload() == 40 * 2 + 16 * 2 + 7 + 4);
  CHECK(ex.q_payload() == 30 * 2 + 64 * 2);
  Optimizer sgd(OptimizerConfig{}, n);
  auto x = to_device(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  Rng rng(3);
  std::vector<float> g(static_cast<std::size_t>(n));
  for (auto& v : g) v = static_cast<float>(rng.normal());
  ex.step(x, to_device(g), sgd, 0.1);
  CHECK(ex.stats().last_step.bytes_sent == 4u * (40 * 2 + 16 * 2 + 7 + 4 + 30 * 2 + 64 * 2));
  CHECK(ex.stats().last_step.messages == 2);
  const auto st = ex.state();
  REQUIRE(st.size() == 2);
  CHECK(st[0].name == "residual");
  CHECK(st[0].view.extent(0) == static_cast<std::size_t>(n));
  CHECK(st[1].name == "powersgd_q");
  CHECK(st[1].merge == StateMerge::mean);

  CHECK_THROWS_WITH(PowerSgdExchange(comm, {}, o), A2SGD_CONTAINS("needs the model's tensor layout"));
  auto gap = lay;
  gap[1].offset += 1;
  CHECK_THROWS_WITH(PowerSgdExchange(comm, gap, o), A2SGD_CONTAINS("b1"));
  o.rank = 0;
  CHECK_THROWS_WITH(PowerSgdExchange(comm, lay, o), A2SGD_CONTAINS("rank 0"));
  ExchangeConfig cfg;
  cfg.method = "powersgd";
  cfg.layout = lay;
  CHECK_THROWS_WITH(make_exchange(cfg, comm, n + 1), A2SGD_CONTAINS("not n ="));
}

namespace {

// Rounding-error bound for one compressed block of one step (Frobenius norms; u and gamma as in
// TestingCatch.hpp, for float32: the BLAS kernel and MPI's reduction order are free).
// The step computes, with M_r = fl(g_r + e_r) (identical to the test's own float sum):
//   P~ = fl(sum_r fl(M_r Q)):   |P~ - P*| <= dP = gamma(cols + p - 1) |sum_r |M_r| |Q||,  P* = sum_r M_r Q
//   P^ = orthonormalised P~:    P^ R = P~ + E with |E| <= 2 r u |P~| (each column is stored at most
//                               2r - 1 times, rounded once each) and |P^T P^ - I|_2 <= eta = r (r+1) u
//                               (the orthonormalisation test below checks that bound)
//   Q^ = fl(fl(sum_r fl(M_r^T P^)) / p):  |Q^ - Mm^T P^| <= dQ = gamma(rows + p + 1) |sum_r |M_r|| |P^| / p
//   u^ = fl(P^ Q^^T):           |u^ - P^ Q^^T| <= gamma(r) |P^| |Q^|
// range(P^) is range(P*) turned by an angle with sin(theta) <= (dP + |E|) / sigma_r(P*) (for y = P* x
// in range(P*), (I - Pi^) y = -(I - Pi^)(dP + E) x and |x| <= |y| / sigma_r). With Mm = mean_r M_r
// and N = the part of Mm outside range(P*) (float rounding of the rank-r construction),
//   |u^ - Mm| <= (sin(theta) + eta) |Mm| + N + (1 + eta) dQ + gamma(r) |P^| |Q^|.
// The exact algebra (u = Mm when rank(Mm) <= r) is what is tested; the bound only admits rounding.
// A bug (missing 1/p, wrong transpose, stale Q, lost dense tensor) errs by O(|Mm|), far above it.
struct BlockBound {
  double bound = 0.0;
  double mean_norm = 0.0;
};

BlockBound block_bound(const std::vector<std::vector<float>>& m_all, const std::vector<float>& q_all, Index offset,
                       Index rows, Index cols, Index q_offset, int r) {
  const auto p = static_cast<int>(m_all.size());
  auto m = [&](int rank, Index i, Index j) { return double(m_all[rank][offset + i * cols + j]); };
  auto q = [&](Index j, int c) { return double(q_all[q_offset + j * r + c]); };
  // P* = sum_r M_r Q and Mm in double (exact products of floats); abs_m = sum_r |M_r| and
  // abs_mq = sum_r |M_r| |Q| entrywise, for the componentwise rounding bounds.
  std::vector<double> pstar(rows * r, 0.0), mean(rows * cols, 0.0), abs_m(rows * cols, 0.0), abs_mq(rows * r, 0.0);
  for (int k = 0; k < p; ++k)
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j) {
        mean[i * cols + j] += m(k, i, j) / p;
        abs_m[i * cols + j] += std::abs(m(k, i, j));
        for (int c = 0; c < r; ++c) {
          pstar[i * r + c] += m(k, i, j) * q(j, c);
          abs_mq[i * r + c] += std::abs(m(k, i, j) * q(j, c));
        }
      }
  auto frobenius = [](const std::vector<double>& v) {
    double s = 0.0;
    for (double x : v) s += x * x;
    return std::sqrt(s);
  };
  // sigma_r(P*) from the r x r Gram matrix (r <= 2 here: closed form).
  REQUIRE(r <= 2);
  double g00 = 0, g01 = 0, g11 = 0;
  for (Index i = 0; i < rows; ++i) {
    g00 += pstar[i * r] * pstar[i * r];
    if (r == 2) g01 += pstar[i * r] * pstar[i * r + 1], g11 += pstar[i * r + 1] * pstar[i * r + 1];
  }
  const double tr = g00 + g11, det = g00 * g11 - g01 * g01;
  const double lambda_max = r == 1 ? g00 : tr / 2 + std::sqrt(std::max(0.0, tr * tr / 4 - det));
  const double lambda_min = r == 1 ? g00 : det / lambda_max;  // no cancellation
  const double sigma_r = std::sqrt(std::max(0.0, lambda_min)), pstar_norm = std::sqrt(tr);
  // N = |(I - B B^T) Mm| with B an orthonormal basis of range(P*) (Gram-Schmidt in double).
  std::vector<double> basis = pstar;
  for (int c = 0; c < r; ++c) {
    for (int k = 0; k < c; ++k) {
      double d = 0;
      for (Index i = 0; i < rows; ++i) d += basis[i * r + k] * basis[i * r + c];
      for (Index i = 0; i < rows; ++i) basis[i * r + c] -= d * basis[i * r + k];
    }
    double nrm = 0;
    for (Index i = 0; i < rows; ++i) nrm += basis[i * r + c] * basis[i * r + c];
    for (Index i = 0; i < rows; ++i) basis[i * r + c] /= std::sqrt(nrm);
  }
  double outside = 0.0, mean_norm = 0.0;
  for (Index j = 0; j < cols; ++j) {
    double coef[2] = {0, 0};
    for (int c = 0; c < r; ++c)
      for (Index i = 0; i < rows; ++i) coef[c] += basis[i * r + c] * mean[i * cols + j];
    for (Index i = 0; i < rows; ++i) {
      double rest = mean[i * cols + j];
      for (int c = 0; c < r; ++c) rest -= basis[i * r + c] * coef[c];
      outside += rest * rest;
      mean_norm += mean[i * cols + j] * mean[i * cols + j];
    }
  }
  outside = std::sqrt(outside);
  mean_norm = std::sqrt(mean_norm);

  const double u = u32, eta = r * (r + 1) * u;
  const double dp = gamma32(double(cols + p - 1)) * frobenius(abs_mq);
  const double e_orth = 2 * r * u * (pstar_norm + dp);
  const double sin_theta = (dp + e_orth) / sigma_r;
  const double p_hat_norm = std::sqrt(double(r)) * (1 + eta);
  const double dq = gamma32(double(rows + p + 1)) * frobenius(abs_m) * p_hat_norm / p;
  const double q_hat_norm = (1 + eta) * mean_norm + dq;
  BlockBound b;
  b.bound = (sin_theta + eta) * mean_norm + outside + (1 + eta) * dq + gamma32(r) * p_hat_norm * q_hat_norm;
  b.mean_norm = mean_norm;
  return b;
}

}  // namespace

TEST_CASE("PowerSGD's host products P = M Q, Q = M^T P and U = P Q^T meet the float dot-product bound for any shape",
          "[powersgd][lowrank]") {
  if constexpr (!host_backend) return;  // device backends run the vendor BLAS
  const ExecutionSpace exec;
  // Each entry is a float dot product of length L in some order (blocked, fused or not): within
  // gamma(L) sum |a_k b_k| of the exact value (computed here in double). A wrong row, column,
  // factor or stride errs by O(|a| |b|), far above it. Shapes cover the 8-row blocks and their
  // tails, odd factor counts (a factor paired with itself) and rows shorter than a vector.
  for (Index rows : {Index(1), Index(7), Index(8), Index(9), Index(61)})
    for (Index cols : {Index(1), Index(15), Index(16), Index(33), Index(3001)})
      for (int r : {1, 2, 3, 4}) {
        INFO(rows << " x " << cols << ", r " << r);
        Rng rng(static_cast<std::uint64_t>(rows * 7919 + cols * 31 + r));
        std::vector<float> m(rows * cols), qt(r * cols), p(rows * r);
        for (auto& x : m) x = static_cast<float>(rng.normal());
        for (auto& x : qt) x = static_cast<float>(rng.normal());
        for (auto& x : p) x = static_cast<float>(rng.normal());
        std::vector<float> p_out(rows * r, -1.0f), qt_out(r * cols, -1.0f), u_out(rows * cols, -1.0f);
        compress::impl::low_rank_project(exec, m.data(), rows, cols, qt.data(), r, p_out.data());
        compress::impl::low_rank_back_project(exec, m.data(), rows, cols, p.data(), r, qt_out.data());
        compress::impl::low_rank_expand(exec, p.data(), qt.data(), rows, cols, r, u_out.data());
        exec.fence();
        // Entries of a product whose dot product of length `len` (term t: a(t) b(t)) misses the bound.
        auto off_bound = [](const std::vector<float>& got, Index count, Index len, auto&& term) {
          int off = 0;
          for (Index e = 0; e < count; ++e) {
            double exact = 0.0, mag = 0.0;
            for (Index t = 0; t < len; ++t) {
              const double x = term(e, t);
              exact += x, mag += std::abs(x);
            }
            off += std::abs(got[e] - exact) > gamma32(double(len)) * mag;
          }
          return off;
        };
        // p[i][k] = m[i] . qt[k]   (e = i r + k)
        CHECK(off_bound(p_out, rows * r, cols,
                        [&](Index e, Index j) { return double(m[(e / r) * cols + j]) * qt[(e % r) * cols + j]; }) == 0);
        // qt[k][j] = sum_i p[i][k] m[i][j]   (e = k cols + j)
        CHECK(off_bound(qt_out, r * cols, rows,
                        [&](Index e, Index i) { return double(p[i * r + e / cols]) * m[i * cols + e % cols]; }) == 0);
        // u[i][j] = sum_k p[i][k] qt[k][j]   (e = i cols + j)
        CHECK(off_bound(u_out, rows * cols, r, [&](Index e, Index k) {
                return double(p[(e / cols) * r + k]) * qt[k * cols + e % cols];
              }) == 0);
        // Q handed over transposed and back: a pure permutation.
        std::vector<float> q(cols * r), back(cols * r);
        compress::impl::untranspose_thin(exec, qt.data(), cols, r, q.data());
        compress::impl::transpose_thin(exec, q.data(), cols, r, back.data());
        exec.fence();
        CHECK(back == qt);
        CHECK(q[(cols - 1) * r + (r - 1)] == qt[(r - 1) * cols + cols - 1]);
      }
}

TEST_CASE("PowerSGD reproduces a rank-r mean exactly up to its rounding bound; e = fl(M - u) bit for bit",
          "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  const auto p = static_cast<std::size_t>(comm.size());
  for (int r : {1, 2}) {
    INFO("rank " << r);
    PowerSgdOptions o;
    o.rank = r;
    PowerSgdExchange ex(comm, lay, o);
    const auto n = static_cast<std::size_t>(ex.size());
    Optimizer sgd(OptimizerConfig{}, ex.size());
    for (int step = 0; step < 3; ++step) {  // later steps start from the warm Q and carry residuals
      INFO("step " << step);
      std::vector<float> g(n);
      Rng rng(100u * step + static_cast<unsigned>(comm.rank()));
      for (auto& v : g) v = static_cast<float>(rng.normal());
      low_rank(g, 0, 40, 30, r, step, comm.rank());
      low_rank(g, 1207, 16, 64, r, step, comm.rank());
      // What the step compresses: M = fl(g + e), the residual of the last step included.
      const auto e_before = to_host(ex.residual());
      std::vector<float> m(n);
      for (std::size_t i = 0; i < n; ++i) m[i] = g[i] + e_before[i];
      const auto q_before = to_host(ex.state()[1].view);
      const auto m_flat = allgather(m);
      std::vector<std::vector<float>> m_all(p);
      for (std::size_t k = 0; k < p; ++k) m_all[k].assign(m_flat.begin() + k * n, m_flat.begin() + (k + 1) * n);

      auto x = to_device(std::vector<float>(n, 0.0f));
      ex.step(x, to_device(g), sgd, 1.0);  // SGD from x = 0 with lr 1: x = -u exactly
      const auto xs = to_host(x), e_after = to_host(ex.residual());

      // Error feedback keeps exactly what was not applied: e = fl(M - u) on matrices, 0 on dense tensors.
      int not_exact = 0;
      for (const auto& b : ex.blocks())
        for (Index i = b.offset; i < b.offset + b.rows * b.cols; ++i) not_exact += e_after[i] != m[i] - (-xs[i]);
      CHECK(not_exact == 0);
      // Dense tensors: u = fl(fl(sum_r M_r) / p), within gamma(p + 1) sum_r |M_r| / p of the mean.
      int dense_off = 0;
      for (const auto& d : ex.dense_slices())
        for (Index i = d.offset; i < d.offset + d.size; ++i) {
          double mean = 0.0, abs_sum = 0.0;
          for (std::size_t k = 0; k < p; ++k) mean += m_all[k][i] / double(p), abs_sum += std::abs(m_all[k][i]);
          dense_off += std::abs(-double(xs[i]) - mean) > gamma32(double(p + 1)) * abs_sum / double(p);
          dense_off += e_after[i] != 0.0f;
        }
      CHECK(dense_off == 0);
      // Compressed matrices: |u - mean_r M_r| within the rounding bound above.
      for (const auto& b : ex.blocks()) {
        INFO("block at " << b.offset);
        const auto bb = block_bound(m_all, q_before, b.offset, b.rows, b.cols, b.q_offset, r);
        double err = 0.0;
        for (Index i = 0; i < b.rows * b.cols; ++i) {
          double mean = 0.0;
          for (std::size_t k = 0; k < p; ++k) mean += m_all[k][b.offset + i] / double(p);
          err += (-double(xs[b.offset + i]) - mean) * (-double(xs[b.offset + i]) - mean);
        }
        err = std::sqrt(err);
        INFO("|u - mean M| = " << err << ", bound " << bb.bound << ", |mean M| = " << bb.mean_norm);
        CHECK(err <= bb.bound);
        // The bound must stay far below the size of the mean, or the check would prove nothing (an
        // algebra bug errs by a sizeable fraction of |Mm|); the construction keeps the step well
        // conditioned (low_rank).
        CHECK(bb.bound <= 1e-3 * bb.mean_norm);
      }
    }
  }
}

TEST_CASE("PowerSGD error feedback: e_new = fl(fl(g + e_old) - u) on matrices, 0 on dense tensors", "[powersgd]") {
  Communicator comm;
  const auto lay = layout();
  PowerSgdExchange ex(comm, lay);
  const auto n = static_cast<std::size_t>(ex.size());
  Optimizer sgd(OptimizerConfig{}, ex.size());
  std::vector<float> e_old(n, 0.0f);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(n);
    Rng rng(500u * step + static_cast<unsigned>(comm.rank()));
    for (auto& v : g) v = static_cast<float>(rng.normal());
    auto x = to_device(std::vector<float>(n, 0.0f));
    ex.step(x, to_device(g), sgd, 1.0);  // x = -u exactly
    const auto xs = to_host(x), e = to_host(ex.residual());
    int wrong = 0, dense_left = 0;
    double residual_norm = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const bool dense = (i >= 1200 && i < 1207) || i >= 1207 + 1024;
      if (dense) {
        dense_left += e[i] != 0.0f;
      } else {
        // The same two float operations as the kernels (g + e, then - u): equal bit for bit.
        const float a = g[i] + e_old[i];
        wrong += e[i] != a - (-xs[i]);
        residual_norm += double(e[i]) * e[i];
      }
    }
    CHECK(wrong == 0);
    CHECK(dense_left == 0);
    CHECK(residual_norm > 1.0);  // full-rank noise: rank 2 cannot carry it, the rest is fed back
    e_old = e;
  }
}

TEST_CASE("orthonormalised P blocks: |P^T P - I| within (r + 1) u, same column spaces, for any conditioning",
          "[powersgd]") {
  // Bound, for the two sweeps of Gram-Schmidt in double with each stored value rounded once to
  // float (u = 2^-24): the normalised column j is p_j (1 + d_i) per entry with |d_i| <= u, so
  // | |p_j|^2 - 1 | <= 2u + u^2. After column j's last projection on column k < j, what rounding
  // leaves is (p_k . rho) with |rho_i| <= u |p_j,i|, at most u |p_j|; each of the j - 1 - k later
  // projections and the normalisation adds at most u more (terms of order u^2 kappa are below
  // u / 100 for kappa <= 1e4). Hence |(P^T P - I)_jk| <= max(2u, (j - k + 1) u) <= (r + 1) u.
  // Spaces: the stored P^ satisfies P^ R = P + E with |E_j| <= 2 j u |P_j| (+ the normalisation's u),
  // so the part of each original column outside range(P^) is at most (2r + 1) u |P_j| plus what
  // the non-orthogonality adds (r (r + 1) u |P_j|).
  const double u = u32;
  for (int r : {1, 2, 4}) {
    for (double kappa : {1.0, 1e2, 1e4}) {
      INFO("r = " << r << ", condition number " << kappa);
      // Two blocks of different heights in one buffer, with a gap between them that must stay untouched.
      const Index rows0 = 1000, rows1 = 37, gap = 5;
      const Index off1 = rows0 * r + gap;
      std::vector<float> host(static_cast<std::size_t>(off1 + rows1 * r), 7.0f);
      Rng rng(static_cast<std::uint64_t>(r * 100 + std::log10(kappa)));
      for (auto [off, rows] : {std::pair<Index, Index>{0, rows0}, {off1, rows1}}) {
        // P = A diag(1, ..., 1/kappa) B with A, B random: singular values from 1 down to 1/kappa.
        std::vector<double> a(rows * r), b(r * r);
        for (auto& v : a) v = rng.normal();
        for (auto& v : b) v = rng.normal();
        for (Index i = 0; i < rows; ++i)
          for (int c = 0; c < r; ++c) {
            double s = 0.0;
            for (int k = 0; k < r; ++k)
              s += a[i * r + k] * std::pow(kappa, -double(k) / std::max(1, r - 1)) * b[k * r + c];
            host[static_cast<std::size_t>(off + i * r + c)] = static_cast<float>(s);
          }
      }
      const auto original = host;
      compress::impl::ColumnBlocks blocks;
      blocks.r = r;
      blocks.offset = Kokkos::View<Index*, MemorySpace>("offset", 2);
      blocks.rows = Kokkos::View<Index*, MemorySpace>("rows", 2);
      auto ho = Kokkos::create_mirror_view(blocks.offset);
      auto hr = Kokkos::create_mirror_view(blocks.rows);
      ho(0) = 0, ho(1) = off1, hr(0) = rows0, hr(1) = rows1;
      Kokkos::deep_copy(blocks.offset, ho);
      Kokkos::deep_copy(blocks.rows, hr);
      auto data = to_device(host);
      compress::impl::orthonormalise_columns(ExecutionSpace(), data, blocks);
      const auto out = to_host(data);
      for (Index i = rows0 * r; i < off1; ++i) CHECK(out[i] == 7.0f);
      for (const auto& block : {std::pair<Index, Index>{0, rows0}, {off1, rows1}}) {
        const Index off = block.first, rows = block.second;
        auto at = [&](const std::vector<float>& v, Index i, int c) { return double(v[off + i * r + c]); };
        double worst = 0.0, worst_space = 0.0;
        for (int j = 0; j < r; ++j) {
          for (int k = 0; k < r; ++k) {
            double d = 0.0;
            for (Index i = 0; i < rows; ++i) d += at(out, i, j) * at(out, i, k);
            worst = std::max(worst, std::abs(d - (j == k)));
          }
          // |(I - P^ P^T) P_j| / |P_j|
          std::vector<double> rest(rows);
          double norm = 0.0, rest_norm = 0.0;
          for (Index i = 0; i < rows; ++i) rest[i] = at(original, i, j), norm += rest[i] * rest[i];
          for (int k = 0; k < r; ++k) {
            double c = 0.0;
            for (Index i = 0; i < rows; ++i) c += at(out, i, k) * at(original, i, j);
            for (Index i = 0; i < rows; ++i) rest[i] -= c * at(out, i, k);
          }
          for (double v : rest) rest_norm += v * v;
          worst_space = std::max(worst_space, std::sqrt(rest_norm / norm));
        }
        INFO("rows " << rows << ": max |P^T P - I| = " << worst / u << " u, outside the space " << worst_space / u
                     << " u");
        CHECK(worst <= (r + 1) * u);
        CHECK(worst_space <= (2 * r + 1 + r * (r + 1)) * u);
      }
    }
  }
  SECTION("a zero column stays zero, a non-finite one becomes NaN") {
    compress::impl::ColumnBlocks blocks;
    blocks.r = 2;
    blocks.offset = Kokkos::View<Index*, MemorySpace>("offset", 1);
    blocks.rows = Kokkos::View<Index*, MemorySpace>("rows", 1);
    Kokkos::deep_copy(blocks.rows, Index(3));
    auto zero = to_device({1, 0, 2, 0, 2, 0});  // column 1 is zero
    compress::impl::orthonormalise_columns(ExecutionSpace(), zero, blocks);
    const auto z = to_host(zero);
    CHECK(z[1] == 0.0f);
    CHECK(z[3] == 0.0f);
    CHECK(z[5] == 0.0f);
    CHECK_THAT(z[0] * z[0] + z[2] * z[2] + z[4] * z[4], WithinAbs(1.0, 3 * u));
    auto inf = to_device({1, std::numeric_limits<float>::infinity(), 2, 1, 2, 1});
    compress::impl::orthonormalise_columns(ExecutionSpace(), inf, blocks);
    const auto f = to_host(inf);
    CHECK((std::isnan(f[1]) && std::isnan(f[3]) && std::isnan(f[5])));
  }
}

TEST_CASE("PowerSGD hands MPI the bytes of docs/methods.md", "[powersgd][methods]") {
  const std::uint64_t r = 2;  // the MLP's three matrices compressed, its biases dense
  check_step_plan(
      "powersgd", {},
      {{4 * (r * (256 + 256 + 10) + 256 + 256 + 10), 4 * r * (784 + 256 + 256)}, CollectiveKind::allreduce, 2});
}
