#pragma once
/// @file ClassificationSource.hpp
/// A DataSource over an in-memory classification dataset (images and labels): every rank draws
/// mini-batches from its shuffled shard (data::ShardSampler, reshuffled per epoch) and evaluates a
/// contiguous part of the test set.

#include <a2sgd/data/Dataset.hpp>
#include <a2sgd/data/ShardSampler.hpp>
#include <a2sgd/train/DataSource.hpp>

#include <memory>

namespace a2sgd::train {

class ClassificationSource final : public DataSource {
 public:
  /// Throws InvalidArgument when a rank's shard holds fewer than `batch` samples.
  ClassificationSource(data::DatasetPair data, int rank, int world, Index batch, Index eval_batch, std::uint64_t seed);

  std::string name() const override { return m_data.train.name; }
  std::uint64_t steps_per_epoch() const override { return m_steps_per_epoch; }
  Index batch_size() const override { return m_batch; }
  std::string unit() const override { return "samples"; }
  nn::BatchShape train_shape() const override { return {m_batch, 1}; }
  nn::BatchShape eval_shape() const override { return {m_eval_batch, 1}; }
  nn::Batch train_batch(const ExecutionSpace& exec, std::uint64_t step) override;
  std::vector<std::string> eval_splits() const override { return {"test"}; }
  Index eval_batches(const std::string& split) const override;
  nn::Batch eval_batch(const ExecutionSpace& exec, const std::string& split, Index i) override;

  const data::DatasetPair& data() const noexcept { return m_data; }

 private:
  data::DatasetPair m_data;
  int m_rank, m_world;
  Index m_batch, m_eval_batch;
  data::ShardSampler m_sampler;
  std::uint64_t m_steps_per_epoch = 0;
  std::uint64_t m_order_epoch = ~std::uint64_t(0);  // the epoch m_order holds
  data::IndexView m_order;
  Matrix m_x;
  LabelView m_y;
};

}  // namespace a2sgd::train
