#pragma once
/// @file PowerSgdExchange.hpp
/// PowerSGD: rank-r power-iteration compression per weight matrix with error feedback
/// (Vogels et al., NeurIPS 2019), the method behind PyTorch's PowerSGD communication hook.

#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/impl/Orthonormalise.hpp>
#include <a2sgd/core/ParameterStore.hpp>

#include <cstdint>
#include <vector>

namespace a2sgd {

struct PowerSgdOptions {
  /// Rank r of the approximation of each compressed matrix.
  int rank = 2;
  /// Seed of the initial Q matrices (identical on every rank).
  std::uint64_t seed = 0;
};

/// Per tensor of the layout: a tensor of two or more dimensions is seen as a matrix
/// M [shape0, rest] and compressed when r (rows + cols) < rows cols; other tensors (biases,
/// small matrices) are exchanged dense.
///
/// Step: M = g + e per compressed matrix; P = M Q; all-reduce of every P together with the dense
/// tensors (one all-reduce of 4 (sum rows r + dense) bytes); P <- orthonormalised columns of P
/// (Gram-Schmidt, twice, in double: impl/Orthonormalise.hpp); Q = M^T P; all-reduce of every Q (4 sum cols r bytes), Q
/// <- Q / p; u = P Q^T (the mean of the ranks' M projected onto span P), e = M - u. Dense tensors: u = mean, no
/// residual. Q is kept as the next step's starting point (warm start) and is part of the checkpointed state; it is
/// identical on all ranks. With planned buckets (plan_buckets()), a bucket's P all-reduce starts as
/// soon as the backward pass finishes it; its orthonormalisation, Q and Q all-reduce follow in
/// step(), in bucket order.
class PowerSgdExchange final : public Exchange {
 public:
  /// `layout`: the model's tensors (ParameterStore::tensors()), covering [0, n) without gaps.
  PowerSgdExchange(const Communicator& comm, const std::vector<TensorInfo>& layout, const PowerSgdOptions& options = {},
                   const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "powersgd"; }
  std::vector<PlannedCollective> own_traffic() const override;
  std::vector<std::pair<std::string, std::string>> own_options() const override;
  std::vector<NamedView> own_state() const override;
  const FloatView& residual() const noexcept { return m_residual; }

  /// One compressed tensor: its place in the flat buffer, its matrix shape and the offsets of
  /// its P and Q blocks in the two all-reduce payloads.
  struct Block {
    Index offset, rows, cols, p_offset, q_offset;
  };
  /// One tensor exchanged dense: its place in the flat buffer and in the P payload.
  struct DenseSlice {
    Index offset, size, p_offset;
  };
  const std::vector<Block>& blocks() const noexcept { return m_blocks; }
  const std::vector<DenseSlice>& dense_slices() const noexcept { return m_dense; }
  /// Floats per rank in the first (P and dense tensors) and second (Q) all-reduce.
  Index p_payload() const noexcept { return static_cast<Index>(m_p.extent(0)); }
  Index q_payload() const noexcept { return static_cast<Index>(m_q.extent(0)); }

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;
  /// A bucket's first all-reduce (its P and dense tensors), started as the backward pass finishes it.
  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override;
  // The step's parts (public for CUDA's device lambdas; run only inside a step): one block's
  // P = M Q and Q = M^T P, one dense tensor into P, the payload poisoned at `at` when the fold
  // found a non-finite entry, and the update from the all-reduced P and Q.
  void project(const Block& b);
  void back_project(const Block& b);
  void pack_dense(const DenseSlice& d);
  void poison(Index at);
  void apply_update(const FloatView& params, Optimizer& opt, double lr, StepStats& stats);

 protected:
  bool bucketed() const override { return true; }
  void buckets_planned() override;

 private:
  static std::string signature(const std::vector<TensorInfo>& layout, const PowerSgdOptions& options);
  static compress::impl::ColumnBlocks columns_of(const std::vector<Block>& blocks, Index r);
  void assign_p_offsets();
  void bucketed_exchange(const FloatView& grad, StepStats& stats);

  /// Per planned bucket (when there are several): its blocks and dense tensors (indices into
  /// m_blocks, m_dense), its ranges of P and Q, its P columns, its Q all-reduce in flight.
  struct Part {
    std::vector<std::size_t> blocks, dense;
    Index p_begin = 0, p_len = 0, q_begin = 0, q_len = 0;
    compress::impl::ColumnBlocks columns;
    Request q_request;
  };

  PowerSgdOptions m_options;
  std::vector<Block> m_blocks;
  std::vector<DenseSlice> m_dense;
  FloatView m_residual;
  FloatView m_update;
  FloatView m_p;                             // P blocks, then the dense tensors
  FloatView m_q;                             // Q blocks (state: warm start)
  FloatView m_qt;                            // host backends: the Q blocks transposed (r x cols)
  compress::impl::ColumnBlocks m_p_columns;  // where the P blocks are, for the orthonormalisation
  std::vector<Part> m_parts;
};

}  // namespace a2sgd
