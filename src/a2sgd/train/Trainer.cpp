#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/comm/ViewCollectives.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/core/BuildInfo.hpp>
#include <a2sgd/core/FaultInjection.hpp>
#include <a2sgd/train/Trainer.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace a2sgd::train {
namespace {

// (||a - b||^2, ||b||^2) in one pass.
std::pair<double, double> distance_and_norm(const ExecutionSpace& exec, const FloatView& a, const FloatView& b) {
  double dist = 0.0, norm = 0.0;
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::train::divergence"), Policy(exec, 0, static_cast<Index>(a.extent(0))),
      KOKKOS_LAMBDA(Index i, double& d, double& n) {
        const double diff = static_cast<double>(a(i)) - b(i);
        d += diff * diff;
        n += static_cast<double>(b(i)) * b(i);
      },
      dist, norm);
  return {dist, norm};
}

std::string join_options(const std::vector<std::pair<std::string, std::string>>& options) {
  std::string s;
  for (const auto& [k, v] : options) s += (s.empty() ? "" : ";") + k + "=" + v;
  return s;
}

std::string optimizer_options(const OptimizerConfig& o) {
  std::ostringstream out;
  out.precision(12);
  out << "momentum=" << o.momentum << ";nesterov=" << o.nesterov << ";beta1=" << o.beta1 << ";beta2=" << o.beta2
      << ";epsilon=" << o.epsilon << ";weight_decay=" << o.weight_decay;
  return out.str();
}

// A per-rank counter stored as a double: refused unless it is an integer in [0, 2^53] (beyond,
// or NaN, the conversion is undefined or inexact).
std::uint64_t counter(double v, const char* name, const std::string& path) {
  if (!(v >= 0.0 && v <= 9007199254740992.0 && v == std::floor(v)))
    throw InvalidArgument("checkpoint " + path + ": per-rank value \"" + name + "\" = " + std::to_string(v) +
                          " is not a count");
  return static_cast<std::uint64_t>(v);
}

// Fails now, not at the first checkpoint after hours of training: the directory can be created
// and a file written in it.
void require_writable_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InvalidArgument("checkpoint directory " + dir + ": " + ec.message());
  const std::filesystem::path probe = std::filesystem::path(dir) / ".a2sgd-write-probe";
  if (!std::ofstream(probe).good())
    throw InvalidArgument("checkpoint directory " + dir + ": cannot create files there");
  std::filesystem::remove(probe, ec);
}

}  // namespace

Trainer::Trainer(const TrainerConfig& config, const Communicator& comm, nn::Model& model, ParameterStore& store,
                 DataSource& data, TrainObserver* observer, StopSignals* stop, const ExecutionSpace& exec)
    : m_config(config),
      m_comm(comm),
      m_model(model),
      m_store(store),
      m_data(data),
      m_observer(observer),
      m_exec(exec),
      m_stop(stop) {}

Trainer::~Trainer() = default;

void Trainer::setup() {
  const TrainerConfig& c = m_config;
  if (!m_stop) {
    m_own_stop = std::make_unique<StopSignals>(m_comm);
    m_stop = m_own_stop.get();
  }
  m_comm.all_or_throw([&] {
    if (!m_store.allocated()) m_store.allocate();
    m_model.reserve(m_data.train_shape(), m_data.eval_shape());
    m_steps_per_epoch = m_data.steps_per_epoch();
    if (m_steps_per_epoch == 0) throw InvalidArgument("the data source has no training step per epoch");
    m_total_steps = c.steps > 0 ? c.steps : c.epochs * m_steps_per_epoch;
    if (m_total_steps == 0) throw InvalidArgument("no training steps (epochs and steps are both 0)");
    m_epochs = (m_total_steps + m_steps_per_epoch - 1) / m_steps_per_epoch;
    LrScheduleConfig lr = c.lr;
    lr.total_steps = m_total_steps;
    m_schedule = std::make_unique<LrSchedule>(lr);
    m_optimizer = std::make_unique<Optimizer>(c.optimizer, m_store.size());
    if (c.clip_norm > 0.0) m_clipper = std::make_unique<GradientClipper>(c.clip_norm);
    if (!c.checkpoint_dir.empty() && !c.eval_only && m_comm.rank() == 0) require_writable_directory(c.checkpoint_dir);
  });

  ExchangeConfig exchange = c.exchange;
  exchange.layout = m_store.tensors();
  // A method's options checked against the model (a Random-K ratio that selects nothing, a
  // PowerSGD rank that compresses no matrix) fail identically on every rank after the method's own
  // collective agreement check: one CollectiveError everywhere, invalid input for the app.
  m_comm.all_or_throw([&] {
    m_exchange = make_exchange(exchange, m_comm, m_store.size(), m_exec);
    // Buckets in the order the model finishes its gradient (dense: one all-reduce per bucket),
    // where they can overlap the backward pass: clipping needs the whole gradient first, and
    // buckets that cannot overlap would only split the exchange into more collectives. (With
    // --overlap off they are planned all the same: the same collectives, started after.)
    if (!m_clipper) m_exchange->plan_buckets(m_model.gradient_order());
  });

  // Every replica starts from rank 0's initialisation.
  if (m_comm.rank() == 0) m_model.initialize(m_store.params(), c.seed);
  broadcast_view(m_comm, m_store.params(), 0);

  if (c.diagnostics_every > 0)
    m_monitor = std::make_unique<UpdateMonitor>(m_comm, m_store.tensors(), m_store.size(), m_exec);
  m_averaged = FloatView("a2sgd::train::averaged", static_cast<std::size_t>(m_store.size()));
  m_replica0 = FloatView("a2sgd::train::replica0", static_cast<std::size_t>(m_store.size()));
  if (!c.resume.empty()) resume();
}

Trainer::Outcome Trainer::run() {
  const TrainerConfig& c = m_config;
  if (c.eval_only) {
    // The averaged model is the one stored in the checkpoint: the exact vector its run evaluated.
    message("evaluating " + m_resumed_from +
            ": its averaged model (the mean of the replicas, the model to deploy) "
            "and rank 0's replica");
    m_last_eval = evaluate(true);
    log_eval(m_start_step, m_last_eval);
    return Outcome::finished;
  }
  std::uint64_t last_eval_step = std::numeric_limits<std::uint64_t>::max();
  m_wall.restart();
  std::uint64_t done = m_start_step;
  try {
    for (; done < m_total_steps;) {
      const std::uint64_t step = done;
      Stopwatch step_clock;
      const nn::Batch batch = m_data.train_batch(m_exec, step);
      const bool monitored = m_monitor && (step + 1) % c.diagnostics_every == 0;
      nn::StepContext context{c.seed, step, m_comm.rank()};
      // Buckets overlap the backward pass unless something reads or changes the local gradient
      // between it and the exchange: clipping (the whole gradient's norm), the update monitor.
      if (!m_clipper && !monitored) context.gradient = m_exchange->begin_step(m_store.grads(), *m_optimizer);
      const nn::LossResult r = m_model.forward_backward(m_exec, m_store.params(), m_store.grads(), batch, context);
      if (!std::isfinite(r.loss_sum)) {
        // Make the exchange see it, so that every rank stops at this step together: in the last
        // bucket, which no collective has read yet.
        Kokkos::deep_copy(m_exec, Kokkos::subview(m_store.grads(), m_exchange->buckets().back().begin),
                          std::numeric_limits<float>::quiet_NaN());
      } else if (m_clipper) {
        m_clipper->apply(m_exec, m_store.grads());
      }
      m_exec.fence();
      m_compute_s += step_clock.seconds();
      if (monitored) m_monitor->before_step(m_store.params(), m_store.grads());
      m_exchange->step(m_store.params(), m_store.grads(), *m_optimizer, (*m_schedule)(step));
      if (monitored) emit(m_monitor->record(step + 1, m_monitor->after_step(m_store.params(), (*m_schedule)(step))));
      const double step_s = step_clock.seconds();
      m_train_s += step_s;
      ++done;
      if (CollectiveWatchdog* watchdog = m_comm.watchdog()) watchdog->note_step(done, step_s);
      fault_point("step", done, m_comm.rank());

      const double count = static_cast<double>(r.count);
      m_interval_loss += r.loss_sum;
      m_interval_count += count;
      m_interval_train_s += step_s;
      if (done % c.log_every == 0 || done == m_total_steps) {
        log_step(done, r.loss_sum / count);
      } else if (m_observer && done % 10 == 0) {
        m_observer->status({done, m_total_steps, epoch_of(done), m_epochs, r.loss_sum / count, m_last_rate,
                            m_data.unit(),
                            m_train_s / static_cast<double>(done) * static_cast<double>(m_total_steps - done), false});
      }

      const bool eval_due =
          c.eval_every ? (*c.eval_every > 0 && done % *c.eval_every == 0) : done % m_steps_per_epoch == 0;
      if ((eval_due || done == m_total_steps) && last_eval_step != done) {
        m_last_eval = evaluate();
        last_eval_step = done;
        log_eval(done, m_last_eval);
        check_divergence(done, m_last_eval);
      }
      const bool checkpoint_due = c.checkpoint_every > 0 && done % c.checkpoint_every == 0 && done < m_total_steps;
      if (checkpoint_due) save_checkpoint(done, last_eval_step == done);
      if (done < m_total_steps && m_stop->poll()) {
        stop(done, last_eval_step == done, checkpoint_due);
        return Outcome::stopped;
      }
    }
    m_stop->finish();  // a signal during the last step: the run is complete anyway
    if (done == m_start_step && m_start_step > 0 && last_eval_step != done) {
      // Resumed a finished run: nothing to train, report the evaluation again.
      m_last_eval = evaluate();
      last_eval_step = done;
      log_eval(done, m_last_eval);
    }
  } catch (const NonFiniteError& e) {
    record_diverged(done, e.what());
    throw;
  } catch (const DivergenceError& e) {
    record_diverged(done, e.what());
    throw;
  }
  if (m_observer) m_observer->finish();
  // The final checkpoint holds the averaged model of the final evaluation.
  if (!c.checkpoint_dir.empty() && done > m_start_step) save_checkpoint(done, last_eval_step == done);
  write_summary(done);
  return Outcome::finished;
}

void Trainer::record_diverged(std::uint64_t done, const std::string& message) {
  if (m_observer) m_observer->finish();
  emit(Record()
           .add("event", "diverged")
           .add("step", done)
           .add("epoch", epoch_of(done + 1))
           .add("wall_s", m_wall_offset + m_wall.seconds())
           .add("message", message));
}

void Trainer::stop(std::uint64_t done, bool averaged_ready, bool checkpointed) {
  if (m_observer) m_observer->finish();
  if (!m_config.checkpoint_dir.empty())
    m_stop_checkpoint =
        checkpointed ? io::checkpoint_path(m_config.checkpoint_dir, done) : save_checkpoint(done, averaged_ready);
  else
    warn("stopped by signal " + std::to_string(m_stop->signal_number()) +
         " without a checkpoint directory: the progress of this run is not saved");
  emit(Record()
           .add("event", "stopped")
           .add("step", done)
           .add("epoch", epoch_of(done))
           .add("wall_s", m_wall_offset + m_wall.seconds())
           .add("signal", m_stop->signal_number())
           .add("checkpoint", m_stop_checkpoint));
}

void Trainer::log_step(std::uint64_t done, double last_loss) {
  double sums[2] = {m_interval_loss, m_interval_count};
  m_comm.allreduce(sums, 2, MPI_SUM);  // diagnostics: not part of the exchange's traffic
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : last_loss;
  // Global predictions per second of training time (compute + exchange, this rank's clock).
  const double rate = m_interval_train_s > 0 ? sums[1] / m_interval_train_s : 0.0;
  const double eta = m_train_s / static_cast<double>(done) * static_cast<double>(m_total_steps - done);
  const ExchangeStats& st = m_exchange->stats();
  Record rec;
  rec.add("event", "train")
      .add("step", done)
      .add("epoch", epoch_of(done))
      .add("wall_s", m_wall_offset + m_wall.seconds())
      .add("lr", (*m_schedule)(done - 1))
      .add("loss", loss);
  if (m_data.perplexity()) rec.add("train_perplexity", std::exp(loss));
  rec.add(m_data.unit() + "_per_s", rate)
      .add("comm_bytes", st.total.bytes_sent)
      .add("comm_messages", st.total.messages)
      .add("compress_s", st.total.compress_s)
      .add("comm_s", st.total.comm_s)
      .add("optimizer_s", st.total.optimizer_s)
      .add("compute_s", m_compute_s);
  emit(rec);
  if (m_observer)
    m_observer->status({done, m_total_steps, epoch_of(done), m_epochs, loss, rate, m_data.unit(), eta, true});
  m_last_rate = rate;
  // A record at the end of the run that is off the --log-every grid leaves the interval open, so
  // that a run resumed from the final checkpoint logs the same intervals as an uninterrupted one.
  if (done % m_config.log_every == 0) m_interval_loss = m_interval_count = m_interval_train_s = 0.0;
}

void Trainer::evaluate_split(const std::string& split, const FloatView& params, double& loss, double& accuracy) {
  double sums[3] = {0.0, 0.0, 0.0};
  m_model.begin_evaluation();
  const Index batches = m_data.eval_batches(split);
  for (Index i = 0; i < batches; ++i) {
    const nn::LossResult r = m_model.evaluate(m_exec, params, m_data.eval_batch(m_exec, split, i));
    sums[0] += r.loss_sum;
    sums[1] += static_cast<double>(r.correct);
    sums[2] += static_cast<double>(r.count);
  }
  m_comm.allreduce(sums, 3, MPI_SUM);
  loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
  accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
}

EvalResult Trainer::evaluate(bool averaged_ready) {
  Stopwatch clock;
  EvalResult r;
  if (!averaged_ready) m_exchange->average_replicas(m_store.params(), m_averaged);
  const auto [dist, norm] = distance_and_norm(m_exec, m_store.params(), m_averaged);
  double ratio = norm > 0 ? std::sqrt(dist / norm) : 0.0;
  double distance = dist;
  m_comm.allreduce(&ratio, 1, MPI_MAX);
  m_comm.allreduce(&distance, 1, MPI_MAX);
  r.replica_divergence = ratio;
  if (m_monitor) r.tensor_divergence = m_monitor->divergence(m_store.params(), m_averaged);
  // Replicas equal to their average bit for bit (dense exchange at 2 ranks, or right after model
  // averaging): rank 0's replica scores what the averaged model scores, without a second pass.
  const bool identical = distance == 0.0;
  if (!identical) {
    if (m_comm.rank() == 0) Kokkos::deep_copy(m_replica0, m_store.params());
    broadcast_view(m_comm, m_replica0, 0);
  }
  for (const std::string& split : m_data.eval_splits()) {
    SplitResult s;
    s.split = split;
    evaluate_split(split, m_averaged, s.loss_averaged, s.accuracy_averaged);
    if (identical)
      s.loss = s.loss_averaged, s.accuracy = s.accuracy_averaged;
    else
      evaluate_split(split, m_replica0, s.loss, s.accuracy);
    r.splits.push_back(s);
  }
  r.seconds = clock.seconds();
  // Every rank holds the same reduced values, so every rank reaches the same verdict.
  for (const SplitResult& s : r.splits)
    if (!std::isfinite(s.loss_averaged) || !std::isfinite(s.loss))
      throw NonFiniteError("evaluation after step " + std::to_string(m_exchange->steps()) + ": the " + s.split +
                               " loss is not finite (the parameters diverged)",
                           -1);
  // A plateau schedule decides on the first split's averaged model (the same on every rank).
  if (!m_config.eval_only && !r.splits.empty())
    m_schedule->observe(r.splits.front().loss_averaged, m_exchange->steps());
  return r;
}

void Trainer::add_split_fields(Record& rec, const EvalResult& r) const {
  for (const SplitResult& s : r.splits) {
    rec.add(s.split + "_loss", s.loss)
        .add(s.split + "_accuracy", s.accuracy)
        .add(s.split + "_loss_averaged", s.loss_averaged)
        .add(s.split + "_accuracy_averaged", s.accuracy_averaged);
    if (m_data.perplexity())
      rec.add(s.split + "_perplexity", std::exp(s.loss))
          .add(s.split + "_perplexity_averaged", std::exp(s.loss_averaged));
  }
}

void Trainer::log_eval(std::uint64_t done, const EvalResult& r) {
  Record rec;
  rec.add("event", "eval")
      .add("step", done)
      .add("epoch", epoch_of(done))
      .add("wall_s", m_wall_offset + m_wall.seconds());
  add_split_fields(rec, r);
  rec.add("replica_divergence", r.replica_divergence).add("eval_s", r.seconds);
  if (m_monitor && !r.tensor_divergence.empty()) m_monitor->add_divergence(rec, r.tensor_divergence);
  if (m_data.perplexity()) rec.add("lr_next", (*m_schedule)(done));
  if (m_config.eval_only) rec.add("checkpoint", m_resumed_from).add("deployed_model", "averaged");
  emit(rec);
  std::string text = "eval  step " + std::to_string(done);
  char buf[256];
  for (const SplitResult& s : r.splits) {
    if (m_data.perplexity())
      std::snprintf(buf, sizeof buf, "  %s perplexity %.2f (replica 0)  %.2f (averaged)", s.split.c_str(),
                    std::exp(s.loss), std::exp(s.loss_averaged));
    else
      std::snprintf(buf, sizeof buf, "  %s loss %.4f  accuracy %.4f (replica 0)  %.4f (averaged)", s.split.c_str(),
                    s.loss, s.accuracy, s.accuracy_averaged);
    text += buf;
  }
  std::snprintf(buf, sizeof buf, "  replica divergence %.4f", r.replica_divergence);
  message(text + buf);
}

void Trainer::check_divergence(std::uint64_t done, const EvalResult& r) {
  // Every input is identical on every rank (reduced values), so every rank reaches the same verdict.
  const TrainerConfig& c = m_config;
  if (r.splits.empty()) return;
  const SplitResult& first = r.splits.front();
  m_rising = first.loss_averaged > m_previous_loss ? m_rising + 1 : 0;  // false against the initial NaN
  m_previous_loss = first.loss_averaged;
  char buf[256];
  std::string reason;
  if (c.divergence_threshold > 0.0 && r.replica_divergence > c.divergence_threshold) {
    std::snprintf(buf, sizeof buf, "the replicas drift apart: replica divergence %.4g exceeds the threshold %.4g",
                  r.replica_divergence, c.divergence_threshold);
    reason = buf;
  } else if (c.divergence_patience > 0 && m_rising >= c.divergence_patience) {
    std::snprintf(buf, sizeof buf, "the averaged model's %s loss rose at %llu consecutive evaluations (now %.4g)",
                  first.split.c_str(), static_cast<unsigned long long>(m_rising), first.loss_averaged);
    reason = buf;
  } else if (c.divergence_gap > 0.0 && first.loss_averaged > (1.0 + c.divergence_gap) * first.loss) {
    // Near a minimum the average of replicas scores at least as well as they do; a clearly worse
    // average means the replicas sit in different places.
    std::snprintf(
        buf, sizeof buf,
        "the averaged model is worse than rank 0's replica: %s loss %.4g against %.4g, more than %.3g%% above",
        first.split.c_str(), first.loss_averaged, first.loss, 100.0 * c.divergence_gap);
    reason = buf;
  }
  if (reason.empty()) return;
  emit(Record()
           .add("event", "divergence_warning")
           .add("step", done)
           .add("epoch", epoch_of(done))
           .add("replica_divergence", r.replica_divergence)
           .add("divergence_threshold", c.divergence_threshold)
           .add("rising_evaluations", m_rising)
           .add("divergence_patience", c.divergence_patience)
           .add(first.split + "_loss_averaged", first.loss_averaged)
           .add(first.split + "_loss", first.loss)
           .add("divergence_gap", c.divergence_gap)
           .add("stop", c.stop_on_divergence)
           .add("reason", reason));
  const std::string text = "step " + std::to_string(done) + ": " + reason + (c.stop_on_divergence ? "; stopping" : "");
  if (m_observer) m_observer->rank_warning(m_comm.rank(), text);
  if (c.stop_on_divergence) throw DivergenceError("step " + std::to_string(done) + ": " + reason, -1);
}

void Trainer::write_summary(std::uint64_t done) {
  const ExchangeStats& st = m_exchange->stats();
  const double steps = static_cast<double>(std::max<std::uint64_t>(done, 1));
  const double bytes_per_step = static_cast<double>(st.total.bytes_sent) / steps;
  const double dense_bytes = 4.0 * static_cast<double>(m_store.size());
  // The model a run delivers is the mean of the replicas, computed by the final evaluation's
  // all-reduce of the parameters: where the replicas differ, that average is part of the run's
  // traffic. The replicas themselves stay as they are (in the final checkpoint too, next to the
  // average), so that a run continued from it is the same as one that never stopped.
  const std::uint64_t final_average_bytes =
      m_last_eval.replica_divergence > 0.0 ? 4u * static_cast<std::uint64_t>(m_store.size()) : 0u;
  Record rec;
  rec.add("event", "summary")
      .add("model", m_model.describe())
      .add("dataset", m_data.name())
      .add("compressor", m_exchange->name())
      .add("optimizer", to_string(m_config.optimizer.kind))
      .add("lr", m_config.lr.base_lr)
      .add("lr_schedule", to_string(m_config.lr.kind))
      .add("lr_warmup_steps", static_cast<std::int64_t>(m_config.lr.warmup_steps))
      .add("world_size", m_comm.size())
      .add("num_params", static_cast<std::int64_t>(m_store.size()))
      .add("batch_size", static_cast<std::int64_t>(m_data.batch_size()))
      .add("steps", done)
      .add("epochs", m_epochs)
      .add("wall_s", m_wall_offset + m_wall.seconds())
      .add("train_s", m_train_s)
      .add("step_time_s", m_train_s / steps)
      .add("compute_s_per_step", m_compute_s / steps)
      .add("compress_s_per_step", st.total.compress_s / steps)
      .add("comm_s_per_step", st.total.comm_s / steps)
      .add("optimizer_s_per_step", st.total.optimizer_s / steps)
      .add("comm_bytes", st.total.bytes_sent)
      .add("collectives", st.total.messages)
      .add("collectives_overlapped", st.total.overlapped)
      .add("buckets", static_cast<std::int64_t>(m_exchange->buckets().size()))
      .add("bytes_per_step", bytes_per_step)
      .add("final_average_bytes", final_average_bytes)
      .add("total_comm_bytes", st.total.bytes_sent + final_average_bytes)
      .add("deployed_model", "averaged")
      .add("dense_bytes_per_step", dense_bytes)
      .add("reduction_factor", bytes_per_step > 0 ? dense_bytes / bytes_per_step : 0.0);
  // The exchange's regular step projected to larger runs with the alpha-beta model (the links and
  // rank counts of docs/training.md, "Summary"), for time-to-target estimates of a cluster this
  // run cannot measure. Allgather payloads are decoded once per rank, so their decode time grows
  // with p; the flag tells a report to scale optimizer_s_per_step accordingly.
  const std::vector<PlannedCollective> traffic = m_exchange->step_traffic();
  bool allgather = false;
  for (const PlannedCollective& c : traffic) allgather = allgather || c.kind == CollectiveKind::allgather;
  rec.add("decode_scales_with_ranks", allgather);
  // What the method plans per regular step (periodic collectives amortised): a run without a
  // dense warm-up hands MPI exactly this per step.
  double planned = 0.0;
  for (const PlannedCollective& c : traffic) planned += static_cast<double>(c.bytes) / static_cast<double>(c.every);
  rec.add("planned_bytes_per_step", planned);
  // The memory traffic of the method's kernels per step at this rank count (KernelTraffic, SGD as
  // the optimizer): with a device's bandwidth, a projection's estimate of the local exchange time
  // where this run's measured one (on another machine) does not carry over.
  const KernelTraffic kernels = exchange_method(m_config.exchange.method)
                                    .kernel_traffic(static_cast<double>(m_store.size()), planned, m_comm.size());
  rec.add("kernel_bytes_compress", kernels.compress.bytes()).add("kernel_bytes_apply", kernels.apply.bytes());
  for (const Link& link : m_config.projection_links) {
    for (int p : m_config.projection_ranks)
      rec.add("modelled_comm_s_p" + std::to_string(p) + "_" + std::to_string(std::lround(link.gbit_per_s())) + "gbps",
              step_comm_seconds(traffic, p, link));
  }
  if (m_config.model_link)
    rec.add("model_link_gbit_per_s", m_config.model_link->gbit_per_s())
        .add("model_link_alpha_s", m_config.model_link->alpha_s)
        .add("model_link_full_duplex", m_config.model_link->full_duplex)
        .add("modelled_comm_s_per_step", step_comm_seconds(traffic, m_comm.size(), *m_config.model_link));
  add_split_fields(rec, m_last_eval);
  rec.add("replica_divergence", m_last_eval.replica_divergence);
  for (const auto& [key, value] : m_exchange->options()) rec.add("a2sgd_" + key, value);
  emit(rec);
}

// ---- checkpoints ----

io::CheckpointMetadata Trainer::checkpoint_metadata(std::uint64_t done) const {
  io::CheckpointMetadata m;
  m.library_version = version();
  m.model = m_model.describe();
  m.layout = m_store.describe();
  m.compressor = m_exchange->name();
  m.compressor_options = join_options(m_exchange->options());
  m.optimizer = to_string(m_config.optimizer.kind);
  m.optimizer_options = optimizer_options(m_config.optimizer);
  m.dataset = m_data.name();
  m.world_size = m_comm.size();
  m.num_params = m_store.size();
  m.batch_size = m_data.batch_size();
  m.seed = m_config.seed;
  m.step = done;
  m.epoch = done / m_steps_per_epoch;
  m.samples_in_epoch = (done % m_steps_per_epoch) * static_cast<std::uint64_t>(m_data.batch_size()) *
                       static_cast<std::uint64_t>(m_comm.size());
  return m;
}

// The views of this run's state, and the training loop's counters as per-rank scalars.
io::CheckpointState Trainer::checkpoint_state() {
  io::CheckpointState st;
  st.params = m_store.params();
  st.averaged = m_averaged;
  st.exchange_state = m_exchange->state();
  st.optimizer_state = m_optimizer->state();
  st.model_state = m_model.state();
  st.optimizer_steps = m_optimizer->steps();
  st.exchange_steps = m_exchange->steps();
  const ExchangeStats& x = m_exchange->stats();
  st.scalars = {{"interval_loss", m_interval_loss},
                {"interval_samples", m_interval_count},
                {"exchange_bytes", static_cast<double>(x.total.bytes_sent)},
                {"exchange_messages", static_cast<double>(x.total.messages)},
                {"lr_factor", m_schedule->factor()},
                {"lr_best", m_schedule->best()}};
  st.optional_scalars = {"lr_factor", "lr_best"};
  st.timers = {{"interval_train_s", m_interval_train_s},
               {"last_samples_per_s", m_last_rate},
               {"compute_s", m_compute_s},
               {"train_s", m_train_s},
               {"wall_s", m_wall_offset + m_wall.seconds()},
               {"exchange_compress_s", x.total.compress_s},
               {"exchange_comm_s", x.total.comm_s},
               {"exchange_optimizer_s", x.total.optimizer_s}};
  return st;
}

std::string Trainer::save_checkpoint(std::uint64_t done, bool averaged_ready) {
  Stopwatch clock;
  if (!averaged_ready) m_exchange->average_replicas(m_store.params(), m_averaged);
  const std::string path = io::checkpoint_path(m_config.checkpoint_dir, done);
  if (m_comm.rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(m_config.checkpoint_dir, ec);
  }
  const std::uint64_t bytes = io::write_checkpoint(m_comm, path, checkpoint_metadata(done), checkpoint_state());
  const double seconds = clock.seconds();
  if (m_comm.rank() == 0 && m_config.keep_checkpoints > 0) {
    const auto all = io::list_checkpoints(m_config.checkpoint_dir);
    for (std::size_t i = m_config.keep_checkpoints; i < all.size(); ++i) {
      std::error_code ec;
      std::filesystem::remove(all[i].second, ec);
    }
  }
  emit(Record()
           .add("event", "checkpoint")
           .add("step", done)
           .add("file", path)
           .add("bytes", bytes)
           .add("write_s", seconds));
  char text[512];
  std::snprintf(text, sizeof text, "checkpoint  step %llu  %s  (%.1f MB in %.3f s)",
                static_cast<unsigned long long>(done), path.c_str(), static_cast<double>(bytes) / 1e6, seconds);
  message(text);
  return path;
}

std::string Trainer::find_resume_file() {
  const std::string& dir = m_config.checkpoint_dir;
  if (m_comm.rank() == 0) {
    // A write that was killed leaves its temporary file: never a candidate, removed here.
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec))
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() > 4 && name[0] == '.' && name.rfind(".tmp") == name.size() - 4) {
          warn("removing " + entry.path().string() + " (a checkpoint write that did not finish)");
          std::filesystem::remove(entry.path(), ec);
        }
      }
  }
  // Every rank sees the same directory; rank 0's listing decides.
  std::vector<std::pair<std::uint64_t, std::string>> candidates;
  std::uint64_t count = 0;
  if (m_comm.rank() == 0) {
    candidates = io::list_checkpoints(dir);
    count = candidates.size();
  }
  m_comm.broadcast(&count, 1, 0);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string path = m_comm.rank() == 0 ? candidates[i].second : std::string();
    std::uint64_t len = path.size();
    m_comm.broadcast(&len, 1, 0);
    path.resize(len);
    m_comm.broadcast(path.data(), len, 0);
    try {
      io::read_checkpoint_metadata(m_comm, path);
      return path;
    } catch (const CollectiveError& e) {
      warn(std::string("skipping ") + path + ": " + e.what());
    }
  }
  return {};
}

// Whether this run may continue the checkpoint: the same model layout, exchange method and
// optimizer; settings that change the math only where the user allowed it (resume_overrides).
void Trainer::check_resumable(const io::CheckpointMetadata& meta, const std::string& path) {
  const TrainerConfig& c = m_config;
  m_comm.all_or_throw([&] {
    if (meta.num_params != m_store.size() || meta.layout != m_store.describe())
      throw InvalidArgument("checkpoint " + path + " was written for model '" + meta.model + "' (" +
                            std::to_string(meta.num_params) + " parameters); this run builds '" + m_model.describe() +
                            "' (" + std::to_string(m_store.size()) + " parameters)");
    if (meta.compressor != m_exchange->name())
      throw InvalidArgument("checkpoint " + path + " holds the state of compressor '" + meta.compressor +
                            "'; this run uses '" + m_exchange->name() + "' (exchange method '" + meta.compressor +
                            "' continues it)");
    if (meta.optimizer != to_string(c.optimizer.kind))
      throw InvalidArgument("checkpoint " + path + " holds the state of optimizer '" + meta.optimizer +
                            "'; this run uses '" + to_string(c.optimizer.kind) + "' (optimizer '" + meta.optimizer +
                            "' continues it)");
  });
  // Settings that change the math: an error unless the user said the change is wanted.
  m_comm.all_or_throw([&] {
    auto require = [&](bool differs, const char* key, const std::string& what, const std::string& theirs,
                       const std::string& ours) {
      if (!differs) return;
      if (std::find(c.resume_overrides.begin(), c.resume_overrides.end(), key) != c.resume_overrides.end()) {
        warn(what + " differs from the checkpoint's ('" + theirs + "' there, '" + ours +
             "' here): continuing with this run's, as the resume override '" + key + "' allows");
        return;
      }
      throw InvalidArgument("checkpoint " + path + " was written with " + what + " '" + theirs + "'; this run has '" +
                            ours + "' (the resume override '" + key + "' continues with this run's)");
    };
    require(meta.model != m_model.describe(), "model", "model", meta.model, m_model.describe());
    require(meta.dataset != m_data.name(), "dataset", "dataset", meta.dataset, m_data.name());
    require(meta.batch_size != m_data.batch_size(), "batch-size", "batch size per rank",
            std::to_string(meta.batch_size), std::to_string(m_data.batch_size()));
    // With the same world size, data and batch, the position in the data follows from the step.
    const auto per_step = static_cast<std::uint64_t>(m_data.batch_size()) * static_cast<std::uint64_t>(m_comm.size());
    if (meta.world_size == m_comm.size() && meta.dataset == m_data.name() && meta.batch_size == m_data.batch_size() &&
        (meta.epoch != meta.step / m_steps_per_epoch ||
         meta.samples_in_epoch != (meta.step % m_steps_per_epoch) * per_step))
      throw InvalidArgument("checkpoint " + path + ": step " + std::to_string(meta.step) + ", epoch " +
                            std::to_string(meta.epoch) + " and samples_in_epoch " +
                            std::to_string(meta.samples_in_epoch) + " disagree (" + std::to_string(m_steps_per_epoch) +
                            " steps of " + std::to_string(per_step) + " samples per epoch)");
  });
  if (meta.format_version < 2)
    warn("checkpoint " + path + " has format version " + std::to_string(meta.format_version) +
         ", which carries no checksums: damage to it cannot be detected");
  auto note = [&](bool differs, const std::string& what) {
    if (differs) warn(what + " differs from the checkpoint's; continuing with this run's");
  };
  note(meta.seed != c.seed, "the seed (data order)");
  note(meta.compressor_options != join_options(m_exchange->options()), "the exchange options");
  note(meta.optimizer_options != optimizer_options(c.optimizer), "the optimizer options");
}

// The checkpoint's state into this run's model, exchange, optimizer, schedule and accounting.
void Trainer::restore(const io::CheckpointMetadata& meta, const std::string& path) {
  const TrainerConfig& c = m_config;
  const bool same_world = meta.world_size == m_comm.size();
  io::CheckpointState st = checkpoint_state();
  if (!c.eval_only) st.averaged = FloatView();  // a restart recomputes it when it evaluates
  io::read_checkpoint(m_comm, path, meta, st);
  auto scalar = [&](const char* name) {
    for (const auto* list : {&st.scalars, &st.timers})
      for (const auto& [k, v] : *list)
        if (k == name) return v;
    return 0.0;
  };
  ExchangeStats x;
  m_comm.all_or_throw([&] {
    // Same world size: continue exactly at the checkpoint's step. Otherwise continue in the same
    // epoch at the same fraction of its samples, with the model's carried state reset (the new
    // ranks read other parts of the data).
    m_start_step = same_world
                       ? meta.step
                       : meta.epoch * m_steps_per_epoch +
                             meta.samples_in_epoch / (static_cast<std::uint64_t>(m_data.batch_size()) * m_comm.size());
    if (!same_world) m_model.reset_state();
    m_optimizer->set_steps(st.optimizer_steps);
    x.steps = same_world ? st.exchange_steps : m_start_step;
    x.total.bytes_sent = counter(scalar("exchange_bytes"), "exchange_bytes", path);
    x.total.messages = counter(scalar("exchange_messages"), "exchange_messages", path);
    m_schedule->restore(scalar("lr_factor"), scalar("lr_best"));
  });
  x.total.compress_s = scalar("exchange_compress_s");
  x.total.comm_s = scalar("exchange_comm_s");
  x.total.optimizer_s = scalar("exchange_optimizer_s");
  m_exchange->restore_stats(x);
  m_interval_loss = scalar("interval_loss");
  m_interval_count = scalar("interval_samples");
  m_interval_train_s = scalar("interval_train_s");
  m_last_rate = scalar("last_samples_per_s");
  m_compute_s = scalar("compute_s");
  m_train_s = scalar("train_s");
  m_wall_offset = scalar("wall_s");
}

void Trainer::resume() {
  const TrainerConfig& c = m_config;
  Stopwatch clock;
  const std::string path = c.resume == "auto" ? find_resume_file() : c.resume;
  m_resumed_from = path;
  if (path.empty()) {
    message("no checkpoint in " + c.checkpoint_dir + ": starting from step 0");
    return;
  }
  const io::CheckpointMetadata meta = io::read_checkpoint_metadata(m_comm, path);
  check_resumable(meta, path);
  restore(meta, path);
  const bool same_world = meta.world_size == m_comm.size();
  const double seconds = clock.seconds();
  emit(Record()
           .add("event", "resume")
           .add("step", m_start_step)
           .add("file", path)
           .add("from_world_size", meta.world_size)
           .add("read_s", seconds));
  char text[512];
  std::snprintf(text, sizeof text, "resumed from %s (step %llu, %lld ranks%s) in %.3f s", path.c_str(),
                static_cast<unsigned long long>(m_start_step), static_cast<long long>(meta.world_size),
                same_world ? "" : ", elastic restart", seconds);
  message(text);
}

}  // namespace a2sgd::train
