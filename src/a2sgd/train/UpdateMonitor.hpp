#pragma once
/// @file UpdateMonitor.hpp
/// Diagnostics of what an exchange does to each tensor, for studying compressed methods
/// (docs/convergence.md): per tensor, the norm of the update a step applied against the norm of
/// the mean gradient that a dense all-reduce would have applied, how many entries had exactly zero
/// gradient and how many of those moved anyway; and per tensor, how far the replicas are apart.
/// Its all-reduces are diagnostics: not counted as gradient traffic. Off by default in the
/// Trainer (TrainerConfig::diagnostics_every).

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/train/Observer.hpp>

#include <vector>

namespace a2sgd::train {

/// One tensor's statistics of one step, summed over the ranks.
struct TensorUpdateStats {
  double update_norm = 0.0;        ///< sqrt(sum_r ||(x_before - x_after) / lr||^2) / sqrt(p): the rms rank's update
  double mean_grad_norm = 0.0;     ///< ||(1/p) sum_r g_r||: what dense exchange with SGD applies
  double zero_fraction = 0.0;      ///< entries with g == 0 exactly, over all ranks' entries
  double zero_moved = 0.0;         ///< of those, the fraction whose parameter changed
  double zero_update_share = 0.0;  ///< ||update on the g == 0 entries|| / ||update||
};

class UpdateMonitor {
 public:
  /// Allocates three n-value buffers (the parameters before a step, the gradient, its mean).
  UpdateMonitor(const Communicator& comm, std::vector<TensorInfo> tensors, Index n,
                const ExecutionSpace& exec = ExecutionSpace());

  /// Before the exchange of a monitored step: keeps the parameters and the local gradient.
  void before_step(const FloatView& params, const FloatView& grads);
  /// After it: per tensor statistics of the update (collective; the same on every rank).
  std::vector<TensorUpdateStats> after_step(const FloatView& params, double lr);
  /// Per tensor max_r ||x_r - x_avg|| / ||x_avg|| (collective).
  std::vector<double> divergence(const FloatView& params, const FloatView& averaged) const;

  /// A "diagnostics" record of a step's statistics: <tensor>.<field> keys.
  Record record(std::uint64_t step, const std::vector<TensorUpdateStats>& stats) const;
  /// Adds replica_divergence.<tensor> fields to an evaluation record.
  void add_divergence(Record& rec, const std::vector<double>& divergence) const;

 private:
  const Communicator& m_comm;
  std::vector<TensorInfo> m_tensors;
  ExecutionSpace m_exec;
  FloatView m_before, m_grad, m_mean;
};

}  // namespace a2sgd::train
