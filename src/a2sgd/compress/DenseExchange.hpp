#pragma once
/// @file DenseExchange.hpp
/// The baseline: MPI_Allreduce of the whole gradient, divided by p, then the optimizer.

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

/// Dense all-reduce: u = (1/p) sum_r g_r. Sends n float32 values per rank per step.
/// The gradient buffer is summed in place (it holds the sum of all ranks' gradients afterwards).
/// Planned buckets (plan_buckets()) are summed one MPI_Iallreduce each, overlapping the backward
/// pass when armed (begin_step()).
class DenseExchange final : public Exchange {
 public:
  DenseExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common = {},
                const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "dense"; }
  std::vector<PlannedCollective> own_traffic() const override {
    std::vector<PlannedCollective> t;  // one all-reduce per bucket (one bucket unless planned)
    for (const GradientRange& b : buckets())
      t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(b.size())});
    return t;
  }
  std::vector<std::pair<std::string, std::string>> own_options() const override;

 protected:
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;
  /// One MPI_Iallreduce per bucket (plan_buckets()).
  bool bucketed() const override { return true; }
  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override;
};

}  // namespace a2sgd
