#pragma once
/// @file Synthetic.hpp
/// A synthetic classification problem for tests and runs without data files: Gaussian clusters
/// around random class centres.

#include <a2sgd/data/Dataset.hpp>

#include <cstdint>

namespace a2sgd::data {

struct SyntheticConfig {
  Index train_samples = 20000;
  Index test_samples = 4000;
  Index features = 784;
  int classes = 10;
  /// Centre coordinates are N(0, separation^2 / features), so two centres lie about
  /// separation * sqrt(2) apart whatever the dimension; every sample adds N(0, 1) noise per
  /// feature. Larger separation is easier.
  double separation = 3.0;
  std::uint64_t seed = 1;

  void validate() const;
};

/// Same centres for both sets; labels are balanced round-robin; identical on every rank.
DatasetPair make_synthetic(const SyntheticConfig& config);

}  // namespace a2sgd::data
