#pragma once
/// @file TokenStreamSource.hpp
/// A DataSource over a tokenised corpus for language models: each split is cut into contiguous
/// per-rank parts and batch columns (data::batchify) and read in windows of `bptt` time steps, in
/// order, so that a model's carried state continues from one window to the next. An epoch is
/// every full window of the training columns once.

#include <a2sgd/data/Ptb.hpp>
#include <a2sgd/train/DataSource.hpp>

#include <map>

namespace a2sgd::train {

class TokenStreamSource final : public DataSource {
 public:
  /// Throws InvalidArgument when a rank's training columns hold no full window of bptt + 1 tokens
  /// or a split is too short for the evaluation columns.
  TokenStreamSource(const data::TokenCorpus& corpus, std::string name, int rank, int world, Index batch,
                    Index eval_batch, Index bptt);

  std::string name() const override { return m_name; }
  std::uint64_t steps_per_epoch() const override { return m_steps_per_epoch; }
  Index batch_size() const override { return m_batch; }
  std::string unit() const override { return "tokens"; }
  bool perplexity() const override { return true; }
  nn::BatchShape train_shape() const override { return {m_batch, m_bptt}; }
  nn::BatchShape eval_shape() const override { return {m_eval_batch, m_bptt}; }
  nn::Batch train_batch(const ExecutionSpace& exec, std::uint64_t step) override;
  std::vector<std::string> eval_splits() const override { return {"valid", "test"}; }
  Index eval_batches(const std::string& split) const override;
  nn::Batch eval_batch(const ExecutionSpace& exec, const std::string& split, Index i) override;

 private:
  using Columns = Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, MemorySpace>;
  static Columns to_device(const std::vector<data::Token>& stream, int rank, int world, Index batch,
                           const std::string& what);
  const Columns& split(const std::string& name) const;

  std::string m_name;
  Index m_batch, m_eval_batch, m_bptt;
  Columns m_train;
  std::map<std::string, Columns> m_eval;
  std::uint64_t m_steps_per_epoch = 0;
};

}  // namespace a2sgd::train
