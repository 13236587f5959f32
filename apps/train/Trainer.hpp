#pragma once
// The training loop of a2sgd-train.

#include "Metrics.hpp"
#include "Progress.hpp"
#include "TrainConfig.hpp"

#include <a2sgd/comm/StopSignals.hpp>
#include <a2sgd/core/FaultInjection.hpp>

#include <memory>

namespace a2sgd::train {

/// Results of one evaluation (identical on every rank).
struct EvalResult {
  double test_loss = 0.0;  // rank 0's replica
  double test_accuracy = 0.0;
  double test_loss_averaged = 0.0;  // the mean of all replicas
  double test_accuracy_averaged = 0.0;
  double replica_divergence = 0.0;  // max_r ||x_r - x_avg|| / ||x_avg||
  double seconds = 0.0;
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, const Communicator& comm);

  /// Loads data, builds model, optimizer and exchange, opens output files. Collective: any
  /// failure (bad data file, unwritable output, ...) is a CollectiveError on every rank.
  void setup();

  /// How run() ended (the same on every rank).
  enum class Outcome {
    finished,  ///< every step done (or --eval-only)
    stopped    ///< a stop signal reached some rank: the state is checkpointed, the run must be resumed
  };

  /// Trains and evaluates; NonFiniteError (on every rank) when training diverges.
  Outcome run();

  /// The signal that stopped the run (after run() returned Outcome::stopped).
  int stop_signal() const { return m_stop ? m_stop->signal_number() : 0; }

  /// The checkpoint written when the run stopped ("" without --checkpoint-dir).
  const std::string& stop_checkpoint() const { return m_stop_checkpoint; }

 private:
  EvalResult evaluate(bool averaged_ready = false);
  void resume();
  std::string find_resume_file();
  /// Writes the checkpoint of step `done` and returns its path.
  std::string save_checkpoint(std::uint64_t done, bool averaged_ready);
  void stop(std::uint64_t done, bool averaged_ready, bool checkpointed);
  io::CheckpointMetadata checkpoint_metadata(std::uint64_t done) const;
  io::CheckpointState checkpoint_state();
  void run_eval_only();
  /// A warning on standard error (rank 0), printed even with --quiet.
  void warn(const std::string& text);
  void log_step(std::uint64_t done, double loss);
  void log_eval(std::uint64_t done, const EvalResult& r);
  void write_summary(std::uint64_t done, const EvalResult& last);
  std::uint64_t epoch_of(std::uint64_t done) const { return (done + m_steps_per_epoch - 1) / m_steps_per_epoch; }

  TrainConfig m_config;
  const Communicator& m_comm;
  ExecutionSpace m_exec;

  data::DatasetPair m_data;
  ParameterStore m_store;
  std::unique_ptr<nn::Mlp> m_model;
  std::unique_ptr<Optimizer> m_optimizer;
  std::unique_ptr<LrSchedule> m_schedule;
  std::unique_ptr<data::ShardSampler> m_sampler;
  std::unique_ptr<Exchange> m_exchange;
  std::unique_ptr<StopSignals> m_stop;
  std::string m_stop_checkpoint;

  Matrix m_batch_x;
  LabelView m_batch_y;
  data::IndexView m_order;
  FloatView m_averaged;
  FloatView m_replica0;

  std::uint64_t m_start_step = 0;  // steps already done when this run started (resume)
  double m_wall_offset = 0.0;      // wall time of the runs before a resume
  std::uint64_t m_steps_per_epoch = 0;
  std::uint64_t m_total_steps = 0;
  std::uint64_t m_epochs = 0;

  MetricsWriter m_metrics;
  std::unique_ptr<Progress> m_progress;
  Stopwatch m_wall;
  double m_compute_s = 0.0;  // gather + forward + backward, this rank
  double m_train_s = 0.0;    // compute + exchange, this rank
  // since the last log record
  double m_interval_loss = 0.0;
  double m_interval_samples = 0.0;
  double m_interval_train_s = 0.0;
  double m_last_samples_per_s = 0.0;
};

}  // namespace a2sgd::train
