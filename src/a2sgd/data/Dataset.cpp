#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Dataset.hpp>

#include <cmath>

namespace a2sgd::data {

void gather_batch(const ExecutionSpace& exec, const Dataset& data, const IndexView& order, Index offset, Index batch,
                  const Matrix& x, const LabelView& labels) {
  if (offset < 0 || offset + batch > static_cast<Index>(order.extent(0)) || batch > static_cast<Index>(x.extent(0)))
    throw InvalidArgument("gather_batch: batch [" + std::to_string(offset) + ", " + std::to_string(offset + batch) +
                          ") out of range");
  const Matrix images = data.images;
  const LabelView src_labels = data.labels;
  const Index features = data.features();
  // One team per row, its threads over the features: consecutive threads copy consecutive
  // values (coalesced on a GPU); host teams are one thread copying a contiguous row.
  using Team = Kokkos::TeamPolicy<ExecutionSpace>;
  if (batch == 0) return;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::data::gather_batch"), Team(exec, static_cast<int>(batch), host_backend ? 1 : 128),
      KOKKOS_LAMBDA(const Team::member_type& team) {
        const Index b = team.league_rank();
        const Index s = order(offset + b);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, features), [&](Index j) { x(b, j) = images(s, j); });
        Kokkos::single(Kokkos::PerTeam(team), [&]() { labels(b) = src_labels(s); });
      });
}

void normalize(DatasetPair& pair) {
  const Matrix train = pair.train.images;
  const auto count = static_cast<double>(train.size());
  if (count == 0) throw InvalidArgument("normalize: empty training set");
  double sum = 0.0, sum_sq = 0.0;
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::data::moments"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(0, pair.train.size()),
      KOKKOS_LAMBDA(Index i, double& s, double& s2) {
        for (Index j = 0; j < static_cast<Index>(train.extent(1)); ++j) {
          const double v = train(i, j);
          s += v;
          s2 += v * v;
        }
      },
      sum, sum_sq);
  const double mean = sum / count;
  const double var = sum_sq / count - mean * mean;
  const auto shift = static_cast<float>(mean);
  const auto inv_std = static_cast<float>(var > 1e-24 ? 1.0 / std::sqrt(var) : 1.0);
  for (Matrix m : {pair.train.images, pair.test.images}) {
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::data::normalize"),
        Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(0, static_cast<Index>(m.size())),
        KOKKOS_LAMBDA(Index i) { m.data()[i] = (m.data()[i] - shift) * inv_std; });
  }
  Kokkos::fence();
}

}  // namespace a2sgd::data
