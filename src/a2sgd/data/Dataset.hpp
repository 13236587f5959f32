#pragma once
/// @file Dataset.hpp
/// An in-memory classification dataset on the device, and mini-batch assembly.

#include <a2sgd/core/Types.hpp>

#include <string>

namespace a2sgd::data {

/// Samples as rows of a float32 matrix (normalised features) with integer labels in
/// [0, num_classes).
struct Dataset {
  std::string name;
  Matrix images;
  LabelView labels;
  int num_classes = 0;

  Index size() const noexcept { return static_cast<Index>(images.extent(0)); }
  Index features() const noexcept { return static_cast<Index>(images.extent(1)); }
};

/// A training set and its held-out test set.
struct DatasetPair {
  Dataset train;
  Dataset test;
};

/// Sample indices on the device (one epoch's shard order).
using IndexView = Kokkos::View<Index*, MemorySpace>;

/// Copies the samples order(offset), ..., order(offset + batch - 1) into the first `batch` rows
/// of x and labels (one kernel).
void gather_batch(const ExecutionSpace& exec, const Dataset& data, const IndexView& order, Index offset, Index batch,
                  const Matrix& x, const LabelView& labels);

/// Feature-wise affine normalisation x <- (x - mean) / std applied to both sets, with the mean
/// and standard deviation of all training features (one scalar each, as is usual for images).
void normalize(DatasetPair& pair);

}  // namespace a2sgd::data
