#pragma once
/// @file LocalExchange.hpp
/// Local SGD (Stich 2019; Lin et al., ICLR 2020): each rank steps its own replica with its own
/// gradient and nothing is exchanged between the periodic averages of the averaging policy
/// (CommonExchangeOptions::averaging). With a dense warm-up it is post-local SGD; with an outer
/// Nesterov optimizer at the averages it is DiLoCo (Douillard et al. 2023).

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

struct LocalOptions {
  /// The first warmup_steps steps use a dense all-reduce (post-local SGD).
  std::uint64_t warmup_steps = 0;
};

/// Local steps: the optimizer applied to this rank's own gradient (optimizer_s), no collective.
/// The averaging policy's periods are the only exchange; without one (every = 0) the replicas
/// meet only in the trainer's final average (one-shot averaging).
///
/// A rank whose own gradient is not finite cannot tell the others at once without a collective
/// per step. It keeps the count and every rank learns it at the next average, where one
/// all-reduce of 8 bytes precedes the model's: all ranks then raise NonFiniteError together
/// (that rank's parameters are already non-finite, as with a dense all-reduce).
class LocalExchange final : public Exchange {
 public:
  LocalExchange(const Communicator& comm, Index n, const LocalOptions& options = {},
                const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "local"; }
  /// Nothing per step; with averaging, the 8-byte count of non-finite values at every average.
  std::vector<PlannedCollective> own_traffic() const override;
  std::vector<std::pair<std::string, std::string>> own_options() const override;
  std::uint64_t synchronous_steps() const override { return m_options.warmup_steps; }

  const LocalOptions& local_options() const noexcept { return m_options; }

 protected:
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;

 private:
  LocalOptions m_options;
  double m_non_finite_pending = 0.0;  // this rank's non-finite gradient values since the last average
};

}  // namespace a2sgd
