#pragma once
/// @file Exchange.hpp
/// The interface every gradient-exchange method implements (dense, A2SGD, and later Top-K,
/// QSGD, PowerSGD, ...). A method owns its per-rank state, talks to MPI through a Communicator
/// (any number of rounds, fixed or variable payloads) and applies the optimizer itself, so it
/// can fuse decoding with the update.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <string>
#include <utility>
#include <vector>

namespace a2sgd {

/// Options common to all methods.
struct CommonExchangeOptions {
  /// Hand device pointers straight to MPI (CUDA/ROCm-aware MPI). When false and the data lives in
  /// memory the host cannot read, dense payloads are staged through a host buffer.
  bool gpu_aware_mpi = false;
};

/// One data-parallel gradient exchange method on a flat buffer of n float32 values.
///
/// The Communicator passed at construction must outlive the exchange. Construction is
/// collective: all ranks must build the same method with the same options and the same n,
/// otherwise every rank throws CollectiveError.
class Exchange {
 public:
  virtual ~Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  /// Method name as selected by make_exchange(): "dense", "a2sgd", ...
  virtual std::string name() const = 0;
  /// Options that define the method, as (key, value) text, for logs and checkpoint metadata.
  virtual std::vector<std::pair<std::string, std::string>> options() const = 0;
  /// Per-rank state of the method (e.g. the A2SGD residual); restored in place on restart.
  virtual std::vector<NamedView> state() const { return {}; }
  /// The collectives of one regular step (for A2SGD: after warm-up, without periodic model
  /// averaging) and the bytes this rank hands to MPI in each: the formulas of docs/methods.md.
  /// stats().last_step.bytes_sent equals their sum.
  virtual std::vector<PlannedCollective> step_traffic() const = 0;

  /// One training step (collective): exchanges this rank's gradient `grad` (n values; it may be
  /// used as scratch space and is left unspecified) and applies `opt` with learning rate `lr`
  /// to `params`. Non-finite gradients raise NonFiniteError on every rank: A2SGD detects them
  /// before anything is modified; a dense all-reduce detects them while applying the average,
  /// so the parameters are then non-finite too.
  void step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr);

  /// Collective: out <- mean over ranks of params (out may alias params). One O(n) all-reduce,
  /// accounted in stats().averaging, never in the training traffic.
  void average_replicas(const FloatView& params, const FloatView& out);

  const ExchangeStats& stats() const noexcept { return m_stats; }
  /// Steps completed (drives warm-up and periodic averaging); restored on restart.
  std::uint64_t steps() const noexcept { return m_stats.steps; }
  void set_steps(std::uint64_t steps) noexcept { m_stats.steps = steps; }
  /// Restores the accounting of an interrupted run (checkpoint restart).
  void restore_stats(const ExchangeStats& stats) noexcept { m_stats = stats; }

  Index size() const noexcept { return m_size; }
  const Communicator& comm() const noexcept { return *m_comm; }
  const ExecutionSpace& exec() const noexcept { return m_exec; }

 protected:
  /// `signature` identifies method and options; ranks must agree on it and on n.
  Exchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
           const std::string& signature);

  /// The method's step; add costs to `stats` (zeroed by the caller).
  virtual void do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) = 0;

  /// In-place sum over ranks of a float buffer, staged through the host when MPI cannot read it.
  void allreduce_sum(const FloatView& data, StepStats& stats);
  /// Stand-alone optimizer pass params <- step(scale * grad), billed to optimizer_s; throws
  /// NonFiniteError when the (all-reduced, hence identical on all ranks) gradient is not finite.
  void apply_dense(const FloatView& params, const ConstFloatView& grad, Optimizer& opt, double lr, float scale,
                   StepStats& stats);
  /// data <- data * factor.
  void scale(const FloatView& data, float factor) const;

  const CommonExchangeOptions& common_options() const noexcept { return m_common; }

 private:
  const Communicator* m_comm;
  Index m_size;
  ExecutionSpace m_exec;
  CommonExchangeOptions m_common;
  ExchangeStats m_stats;
  Kokkos::View<float*, Kokkos::HostSpace> m_host_staging;
};

}  // namespace a2sgd
