#pragma once
/// @file DataSource.hpp
/// Where a Trainer's batches come from: this rank's training batches, step by step, and its share
/// of each evaluation split.

#include <a2sgd/nn/Model.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd::train {

class DataSource {
 public:
  virtual ~DataSource() = default;
  DataSource() = default;
  DataSource(const DataSource&) = delete;
  DataSource& operator=(const DataSource&) = delete;

  /// The dataset's name (checkpoint metadata, metrics).
  virtual std::string name() const = 0;
  /// Training steps per epoch (the same on every rank).
  virtual std::uint64_t steps_per_epoch() const = 0;
  /// Per-rank batch size as stored in checkpoints: samples, or columns of a token stream. The
  /// elastic-restart arithmetic counts an epoch's progress in these units over all ranks.
  virtual Index batch_size() const = 0;
  /// What a prediction is called in rates ("samples" -> samples_per_s, "tokens" -> tokens_per_s).
  virtual std::string unit() const = 0;
  /// Whether the loss is reported as perplexity too (language models).
  virtual bool perplexity() const { return false; }

  /// The largest training and evaluation batches (nn::Model::reserve()).
  virtual nn::BatchShape train_shape() const = 0;
  virtual nn::BatchShape eval_shape() const = 0;

  /// This rank's training batch of global step `step` (a pure function of the step, so that a
  /// resumed run sees the batches of an uninterrupted one). Valid until the next call.
  virtual nn::Batch train_batch(const ExecutionSpace& exec, std::uint64_t step) = 0;

  /// Names of the evaluation splits, the one that drives a plateau schedule first.
  virtual std::vector<std::string> eval_splits() const = 0;
  /// Number of this rank's evaluation batches of `split`; together the ranks cover the split once.
  virtual Index eval_batches(const std::string& split) const = 0;
  /// This rank's evaluation batch i of `split` (i < eval_batches(split)), in order.
  virtual nn::Batch eval_batch(const ExecutionSpace& exec, const std::string& split, Index i) = 0;
};

}  // namespace a2sgd::train
