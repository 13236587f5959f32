#pragma once
/// @file Trainer.hpp
/// The data-parallel training loop over any nn::Model and DataSource: per step a batch, forward
/// and backward, optional global-norm clipping of the local gradient, the exchange (which applies
/// the optimizer); periodic evaluation of rank 0's replica and of the averaged model; checkpoints
/// with bit-exact and elastic restarts; stop signals (Slurm preemption) that checkpoint and end
/// the run with the requeue outcome.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/comm/StopSignals.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/io/Checkpoint.hpp>
#include <a2sgd/nn/Model.hpp>
#include <a2sgd/optim/GradientClip.hpp>
#include <a2sgd/optim/LrSchedule.hpp>
#include <a2sgd/optim/Optimizer.hpp>
#include <a2sgd/train/DataSource.hpp>
#include <a2sgd/train/Observer.hpp>
#include <a2sgd/train/UpdateMonitor.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace a2sgd::train {

struct TrainerConfig {
  std::uint64_t epochs = 3;
  std::uint64_t steps = 0;  ///< > 0 overrides epochs
  std::uint64_t seed = 1;   ///< initialisation and the model's random streams (dropout)
  OptimizerConfig optimizer;
  LrScheduleConfig lr;
  ExchangeConfig exchange;  ///< its layout is filled from the ParameterStore
  double clip_norm = 0.0;   ///< > 0: clip each rank's gradient to this global L2 norm before the exchange
  std::optional<std::uint64_t> eval_every;  ///< unset: once per epoch; 0: once, at the end
  std::uint64_t log_every = 50;
  std::string checkpoint_dir;
  std::uint64_t checkpoint_every = 0;  ///< 0: only the final checkpoint (with checkpoint_dir)
  std::uint64_t keep_checkpoints = 3;  ///< 0: keep all
  std::string resume;                  ///< "", "auto" (newest valid in checkpoint_dir) or a file
  bool eval_only = false;              ///< evaluate the checkpoint named by resume, then stop
  /// Settings that change the math but may differ from the checkpoint's on resume: any of
  /// "batch-size", "dataset", "model" (the model's description; its layout must still match).
  /// Any other difference in them is an error.
  std::vector<std::string> resume_overrides;
  /// Divergence monitor (docs/training.md, "Divergence"), checked at every evaluation: a replica
  /// divergence above this (0: off), or the first split's averaged loss rising at this many
  /// consecutive evaluations (0: off), warns on every rank and records a divergence_warning.
  double divergence_threshold = 0.5;
  std::uint64_t divergence_patience = 3;
  /// ...or the averaged model's first-split loss above rank 0's replica's by more than this
  /// fraction (0: off): averaging drifted replicas made a worse model than one of them.
  double divergence_gap = 0.05;
  bool stop_on_divergence = false;  ///< ...and then stops every rank with DivergenceError
  /// > 0: every this many steps a "diagnostics" record of what the exchange did to each tensor,
  /// and per-tensor replica divergence in every evaluation record (UpdateMonitor; diagnostic
  /// collectives outside the gradient traffic, and the monitored steps take longer).
  std::uint64_t diagnostics_every = 0;
  /// A link to model this run's exchange on (alpha-beta, at this run's rank count): the summary
  /// then has modelled_comm_s_per_step for it, next to the measured comm_s_per_step.
  std::optional<Link> model_link;
  /// The clusters the summary projects this run's exchange onto: modelled_comm_s_p<P>_<G>gbps for
  /// every link and rank count here. By default the two networks of the paper's comparison
  /// (10 Gb/s with 10 us latency, 100 Gb/s with 1.5 us) at 8, 32 and 128 ranks.
  std::vector<Link> projection_links = {Link{10e-6, 10e9 / 8, true}, Link{1.5e-6, 100e9 / 8, true}};
  std::vector<int> projection_ranks = {8, 32, 128};
};

/// One split's evaluation (identical on every rank).
struct SplitResult {
  std::string split;
  double loss = 0.0;  ///< mean loss per prediction, rank 0's replica
  double accuracy = 0.0;
  double loss_averaged = 0.0;  ///< the mean of all replicas
  double accuracy_averaged = 0.0;
};

struct EvalResult {
  std::vector<SplitResult> splits;
  double replica_divergence = 0.0;        ///< max_r ||x_r - x_avg|| / ||x_avg||
  std::vector<double> tensor_divergence;  ///< the same per tensor (with diagnostics only)
  double seconds = 0.0;
};

class Trainer {
 public:
  /// Every reference must outlive the Trainer. `store` holds the model's tensors (allocated here
  /// if it is not yet); `stop` may be given when the caller installed the handlers earlier (to
  /// cover data loading), else setup() installs them.
  Trainer(const TrainerConfig& config, const Communicator& comm, nn::Model& model, ParameterStore& store,
          DataSource& data, TrainObserver* observer = nullptr, StopSignals* stop = nullptr,
          const ExecutionSpace& exec = ExecutionSpace());
  ~Trainer();

  /// Builds optimizer, schedule and exchange, initialises the model (rank 0's initialisation
  /// broadcast), and resumes when asked. Collective: failures are CollectiveErrors on every rank.
  void setup();

  enum class Outcome {
    finished,  ///< every step done (or eval_only)
    stopped    ///< a stop signal reached some rank: the state is checkpointed, the run must be resumed
  };
  /// Trains and evaluates; NonFiniteError (on every rank) when a loss or parameter is not finite,
  /// DivergenceError when the divergence monitor stops the run.
  Outcome run();

  int stop_signal() const { return m_stop ? m_stop->signal_number() : 0; }
  const std::string& stop_checkpoint() const { return m_stop_checkpoint; }

  std::uint64_t steps_per_epoch() const noexcept { return m_steps_per_epoch; }
  std::uint64_t total_steps() const noexcept { return m_total_steps; }
  std::uint64_t epochs() const noexcept { return m_epochs; }
  std::uint64_t start_step() const noexcept { return m_start_step; }
  const Exchange& exchange() const { return *m_exchange; }
  const LrSchedule& schedule() const { return *m_schedule; }
  /// The last evaluation of run().
  const EvalResult& last_evaluation() const noexcept { return m_last_eval; }

 private:
  EvalResult evaluate(bool averaged_ready = false);
  void evaluate_split(const std::string& split, const FloatView& params, double& loss, double& accuracy);
  void resume();
  void check_resumable(const io::CheckpointMetadata& meta, const std::string& path);
  void restore(const io::CheckpointMetadata& meta, const std::string& path);
  std::string find_resume_file();
  std::string save_checkpoint(std::uint64_t done, bool averaged_ready);
  void stop(std::uint64_t done, bool averaged_ready, bool checkpointed);
  void record_diverged(std::uint64_t done, const std::string& message);
  io::CheckpointMetadata checkpoint_metadata(std::uint64_t done) const;
  io::CheckpointState checkpoint_state();
  void log_step(std::uint64_t done, double loss);
  void log_eval(std::uint64_t done, const EvalResult& r);
  void write_summary(std::uint64_t done);
  void check_divergence(std::uint64_t done, const EvalResult& r);
  void add_split_fields(Record& rec, const EvalResult& r) const;
  void emit(const Record& rec) {
    if (m_observer) m_observer->record(rec);
  }
  void message(const std::string& text) {
    if (m_observer) m_observer->message(text);
  }
  void warn(const std::string& text) {
    if (m_observer) m_observer->warning(text);
  }
  std::uint64_t epoch_of(std::uint64_t done) const { return (done + m_steps_per_epoch - 1) / m_steps_per_epoch; }

  TrainerConfig m_config;
  const Communicator& m_comm;
  nn::Model& m_model;
  ParameterStore& m_store;
  DataSource& m_data;
  TrainObserver* m_observer;
  ExecutionSpace m_exec;

  std::unique_ptr<Optimizer> m_optimizer;
  std::unique_ptr<LrSchedule> m_schedule;
  std::unique_ptr<Exchange> m_exchange;
  std::unique_ptr<GradientClipper> m_clipper;
  std::unique_ptr<UpdateMonitor> m_monitor;
  std::unique_ptr<StopSignals> m_own_stop;
  StopSignals* m_stop;
  std::string m_stop_checkpoint;
  std::string m_resumed_from;  // the checkpoint resumed or evaluated ("" when starting afresh)
  EvalResult m_last_eval;
  // Divergence monitor: the last evaluation's first-split averaged loss (NaN before the first).
  double m_previous_loss = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t m_rising = 0;  // consecutive evaluations at which it rose

  FloatView m_averaged;
  FloatView m_replica0;

  std::uint64_t m_start_step = 0;
  double m_wall_offset = 0.0;
  std::uint64_t m_steps_per_epoch = 0;
  std::uint64_t m_total_steps = 0;
  std::uint64_t m_epochs = 0;

  Stopwatch m_wall;
  double m_compute_s = 0.0;  // batch + forward + backward (+ clipping), this rank
  double m_train_s = 0.0;    // compute + exchange, this rank
  double m_interval_loss = 0.0;
  double m_interval_count = 0.0;  // predictions since the last log record
  double m_interval_train_s = 0.0;
  double m_last_rate = 0.0;
};

}  // namespace a2sgd::train
