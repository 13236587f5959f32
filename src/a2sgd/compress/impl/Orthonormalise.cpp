#include <a2sgd/compress/impl/Orthonormalise.hpp>
#include <a2sgd/core/Math.hpp>

namespace a2sgd::compress::impl {

void orthonormalise_columns(const ExecutionSpace& exec, const FloatView& data, const ColumnBlocks& blocks) {
  using Team = Kokkos::TeamPolicy<ExecutionSpace>;
  using Member = Team::member_type;
  const auto league = static_cast<int>(blocks.offset.extent(0));
  if (league == 0 || blocks.r < 1) return;
  const auto offsets = blocks.offset;
  const auto block_rows = blocks.rows;
  const int r = blocks.r;
  const FloatView p = data;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::powersgd_orthonormalise"), Team(exec, league, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& team) {
        const Index base = offsets(team.league_rank());
        const Index rows = block_rows(team.league_rank());
        const auto range = Kokkos::TeamThreadRange(team, rows);
        for (int j = 0; j < r; ++j) {
          // Two sweeps of modified Gram-Schmidt against the finished columns k < j: the second
          // removes what rounding left of the first (a fraction of order u kappa).
          for (int sweep = 0; sweep < 2; ++sweep) {
            for (int k = 0; k < j; ++k) {
              double dot = 0.0;
              Kokkos::parallel_reduce(
                  range,
                  [&](Index i, double& s) {
                    s += static_cast<double>(p(base + i * r + k)) * static_cast<double>(p(base + i * r + j));
                  },
                  dot);
              Kokkos::parallel_for(range, [&](Index i) {
                const Index at = base + i * r + j;
                p(at) = static_cast<float>(static_cast<double>(p(at)) - dot * static_cast<double>(p(base + i * r + k)));
              });
              team.team_barrier();
            }
          }
          double sq = 0.0;
          Kokkos::parallel_reduce(
              range,
              [&](Index i, double& s) {
                const double v = p(base + i * r + j);
                s += v * v;
              },
              sq);
          // sq of finite floats cannot overflow a double: Inf or NaN means a non-finite entry.
          const bool finite = sq - sq == 0.0;
          if (sq > 0.0 || !finite) {
            const double inv = finite ? 1.0 / a2sgd::detail::sqrt(sq) : 0.0;
            const auto nan = static_cast<float>(sq - sq);  // NaN when not finite
            Kokkos::parallel_for(range, [&](Index i) {
              const Index at = base + i * r + j;
              p(at) = finite ? static_cast<float>(static_cast<double>(p(at)) * inv) : nan;
            });
          }
          team.team_barrier();
        }
      });
}

}  // namespace a2sgd::compress::impl
