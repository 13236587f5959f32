#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/data/Synthetic.hpp>

#include <cmath>
#include <vector>

namespace a2sgd::data {

void SyntheticConfig::validate() const {
  if (train_samples < 1 || test_samples < 1) throw InvalidArgument("synthetic data: sample counts must be positive");
  if (features < 1) throw InvalidArgument("synthetic data: feature count must be positive");
  if (classes < 2) throw InvalidArgument("synthetic data: need at least 2 classes");
  if (!(std::isfinite(separation) && separation > 0.0))
    throw InvalidArgument("synthetic data: separation must be positive");
}

namespace {

Dataset generate(const std::string& name, Index samples, const SyntheticConfig& c, const std::vector<float>& centres,
                 std::uint64_t stream) {
  Dataset d;
  d.name = name;
  d.num_classes = c.classes;
  d.images = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::data::" + name),
                    static_cast<std::size_t>(samples), static_cast<std::size_t>(c.features));
  d.labels = LabelView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::data::" + name + "_labels"),
                       static_cast<std::size_t>(samples));
  auto hx = Kokkos::create_mirror_view(d.images);
  auto hy = Kokkos::create_mirror_view(d.labels);
  Rng rng(derive_seed(c.seed, stream));
  for (Index i = 0; i < samples; ++i) {
    const int label = static_cast<int>(i % c.classes);
    hy(i) = label;
    for (Index j = 0; j < c.features; ++j)
      hx(i, j) = centres[static_cast<std::size_t>(label * c.features + j)] + static_cast<float>(rng.normal());
  }
  Kokkos::deep_copy(d.images, hx);
  Kokkos::deep_copy(d.labels, hy);
  return d;
}

}  // namespace

DatasetPair make_synthetic(const SyntheticConfig& c) {
  c.validate();
  std::vector<float> centres(static_cast<std::size_t>(c.classes * c.features));
  Rng rng(derive_seed(c.seed, 0));
  const double scale = c.separation / std::sqrt(static_cast<double>(c.features));
  for (auto& v : centres) v = static_cast<float>(scale * rng.normal());
  DatasetPair pair{generate("synthetic-train", c.train_samples, c, centres, 1),
                   generate("synthetic-test", c.test_samples, c, centres, 2)};
  normalize(pair);
  return pair;
}

}  // namespace a2sgd::data
