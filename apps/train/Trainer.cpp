#include "Trainer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

namespace a2sgd::train {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

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

// Mean test loss and accuracy of `params`: each rank evaluates a contiguous part of the test
// set, and the sums are reduced over all ranks.
std::pair<double, double> sharded_eval(const Communicator& comm, const ExecutionSpace& exec, nn::Mlp& model,
                                       const FloatView& params, const data::Dataset& test, Index eval_batch) {
  const Index n = test.size();
  const Index begin = n * comm.rank() / comm.size();
  const Index end = n * (comm.rank() + 1) / comm.size();
  double sums[3] = {0.0, 0.0, static_cast<double>(end - begin)};
  for (Index b = begin; b < end; b += eval_batch) {
    const Index e = std::min(end, b + eval_batch);
    const auto range = std::make_pair(b, e);
    const nn::LossResult r = model.evaluate(exec, params, Kokkos::subview(test.images, range, Kokkos::ALL),
                                            Kokkos::subview(test.labels, range));
    sums[0] += r.loss_sum;
    sums[1] += static_cast<double>(r.correct);
  }
  comm.allreduce(sums, 3, MPI_SUM);
  return {sums[0] / sums[2], sums[1] / sums[2]};
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, const Communicator& comm) : m_config(config), m_comm(comm) {}

void Trainer::setup() {
  const TrainConfig& c = m_config;
  // Installed first, so that a signal during data loading or a resume is not fatal either.
  m_stop = std::make_unique<StopSignals>(m_comm);
  m_comm.all_or_throw([&] {
    if (c.dataset == "synthetic")
      m_data = data::make_synthetic(c.synthetic);
    else
      m_data = data::load_idx_dataset(c.data_dir, c.dataset);

    m_model = std::make_unique<nn::Mlp>(
        nn::MlpConfig{m_data.train.features(), c.hidden, static_cast<Index>(m_data.train.num_classes)}, m_store);
    m_store.allocate();
    m_model->reserve(std::max(c.batch_size, c.eval_batch));

    m_sampler = std::make_unique<data::ShardSampler>(m_data.train.size(), m_comm.rank(), m_comm.size(), c.seed);
    m_steps_per_epoch = static_cast<std::uint64_t>(m_sampler->shard_size() / c.batch_size);
    if (m_steps_per_epoch == 0)
      throw InvalidArgument("--batch-size " + std::to_string(c.batch_size) + " exceeds the " +
                            std::to_string(m_sampler->shard_size()) + " training samples of each rank (" +
                            std::to_string(m_data.train.size()) + " over " + std::to_string(m_comm.size()) + " ranks)");
    m_total_steps = c.steps > 0 ? c.steps : c.epochs * m_steps_per_epoch;
    m_epochs = (m_total_steps + m_steps_per_epoch - 1) / m_steps_per_epoch;

    LrScheduleConfig lr = c.lr;
    lr.total_steps = m_total_steps;
    m_schedule = std::make_unique<LrSchedule>(lr);
    m_optimizer = std::make_unique<Optimizer>(c.optimizer, m_store.size());

    // Output files are rank 0's; its failure to create them fails every rank.
    std::string metrics_path = c.metrics;
    if (metrics_path.empty() && !c.output_dir.empty()) metrics_path = c.output_dir + "/metrics.jsonl";
    if (m_comm.rank() == 0) {
      if (!c.output_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(c.output_dir, ec);
        if (ec) throw InvalidArgument("--output-dir " + c.output_dir + ": " + ec.message());
        std::ofstream ini(c.output_dir + "/config.ini");
        ini << c.to_ini();
        if (!ini) throw InvalidArgument("--output-dir " + c.output_dir + ": cannot write config.ini");
      }
      if (!metrics_path.empty()) {
        m_metrics.open(metrics_path, !c.resume.empty());
        if (!m_metrics.good()) throw InvalidArgument("--metrics " + metrics_path + ": cannot open for writing");
      }
    }
  });

  ExchangeConfig exchange = c.exchange;
  exchange.layout = m_store.tensors();
  m_exchange = make_exchange(exchange, m_comm, m_store.size(), m_exec);

  // Every replica starts from rank 0's initialisation.
  if (m_comm.rank() == 0) m_model->initialize(m_store.params(), c.seed, c.init);
  broadcast_view(m_comm, m_store.params(), 0);

  m_batch_x = Matrix("a2sgd::train::batch_x", static_cast<std::size_t>(c.batch_size),
                     static_cast<std::size_t>(m_data.train.features()));
  m_batch_y = LabelView("a2sgd::train::batch_y", static_cast<std::size_t>(c.batch_size));
  m_order = data::IndexView("a2sgd::train::order", static_cast<std::size_t>(m_sampler->shard_size()));
  m_averaged = FloatView("a2sgd::train::averaged", static_cast<std::size_t>(m_store.size()));
  m_replica0 = FloatView("a2sgd::train::replica0", static_cast<std::size_t>(m_store.size()));
  m_progress = std::make_unique<Progress>(m_comm.rank() == 0 && !c.quiet, c.progress_bar, m_total_steps, m_epochs);

  if (m_comm.rank() == 0 && !c.quiet) {
    std::printf("a2sgd-train: %s on %s (%lld train / %lld test samples), %lld parameters, %d ranks\n",
                m_model->describe().c_str(), c.dataset.c_str(), static_cast<long long>(m_data.train.size()),
                static_cast<long long>(m_data.test.size()), static_cast<long long>(m_store.size()), m_comm.size());
    std::printf("  exchange %s, optimizer %s, lr %g (%s), batch %lld per rank, %llu steps (%llu per epoch)\n",
                c.exchange.method.c_str(), to_string(c.optimizer.kind).c_str(), c.lr.base_lr,
                to_string(c.lr.kind).c_str(), static_cast<long long>(c.batch_size),
                static_cast<unsigned long long>(m_total_steps), static_cast<unsigned long long>(m_steps_per_epoch));
    std::fflush(stdout);
  }
  if (!c.resume.empty()) resume();
}

Trainer::Outcome Trainer::run() {
  const TrainConfig& c = m_config;
  if (c.eval_only) {
    run_eval_only();
    return Outcome::finished;
  }
  auto host_order = Kokkos::create_mirror_view(m_order);
  EvalResult last_eval;
  std::uint64_t last_eval_step = std::numeric_limits<std::uint64_t>::max();
  m_wall.restart();
  std::uint64_t done = m_start_step;
  try {
    for (; done < m_total_steps;) {
      const std::uint64_t step = done;
      const std::uint64_t position = step % m_steps_per_epoch;
      if (position == 0 || step == m_start_step) {
        const auto indices = m_sampler->epoch_indices(step / m_steps_per_epoch);
        for (std::size_t i = 0; i < indices.size(); ++i) host_order(i) = indices[i];
        Kokkos::deep_copy(m_order, host_order);
      }
      Stopwatch step_clock;
      data::gather_batch(m_exec, m_data.train, m_order, static_cast<Index>(position) * c.batch_size, c.batch_size,
                         m_batch_x, m_batch_y);
      const nn::LossResult r =
          m_model->forward_backward(m_exec, m_store.params(), m_store.grads(), m_batch_x, m_batch_y);
      if (!std::isfinite(r.loss_sum)) {
        // Make the exchange see it, so that every rank stops at this step together.
        Kokkos::deep_copy(Kokkos::subview(m_store.grads(), 0), std::numeric_limits<float>::quiet_NaN());
      }
      m_exec.fence();
      m_compute_s += step_clock.seconds();
      m_exchange->step(m_store.params(), m_store.grads(), *m_optimizer, (*m_schedule)(step));
      const double step_s = step_clock.seconds();
      m_train_s += step_s;
      ++done;
      fault_point("step", done, m_comm.rank());

      m_interval_loss += r.loss_sum;
      m_interval_samples += static_cast<double>(c.batch_size);
      m_interval_train_s += step_s;
      if (done % c.log_every == 0 || done == m_total_steps)
        log_step(done, r.loss_sum / c.batch_size);
      else if (m_progress->live() && done % 10 == 0)
        m_progress->status(done, epoch_of(done), r.loss_sum / c.batch_size, m_last_samples_per_s,
                           m_train_s / done * (m_total_steps - done), false);

      const bool eval_due =
          c.eval_every ? (*c.eval_every > 0 && done % *c.eval_every == 0) : done % m_steps_per_epoch == 0;
      if (eval_due || done == m_total_steps) {
        if (last_eval_step != done) {
          last_eval = evaluate();
          last_eval_step = done;
          log_eval(done, last_eval);
        }
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
      last_eval = evaluate();
      last_eval_step = done;
      log_eval(done, last_eval);
    }
  } catch (const NonFiniteError& e) {
    m_progress->finish();
    m_metrics.write(JsonRecord()
                        .add("event", "diverged")
                        .add("step", done)
                        .add("epoch", epoch_of(done + 1))
                        .add("wall_s", m_wall_offset + m_wall.seconds())
                        .add("message", e.what()));
    throw;
  }
  m_progress->finish();
  // The final checkpoint holds the averaged model of the final evaluation.
  if (!c.checkpoint_dir.empty() && done > m_start_step) save_checkpoint(done, last_eval_step == done);
  write_summary(done, last_eval);
  return Outcome::finished;
}

void Trainer::stop(std::uint64_t done, bool averaged_ready, bool checkpointed) {
  m_progress->finish();
  if (!m_config.checkpoint_dir.empty())
    m_stop_checkpoint =
        checkpointed ? io::checkpoint_path(m_config.checkpoint_dir, done) : save_checkpoint(done, averaged_ready);
  else
    warn("stopped by signal " + std::to_string(m_stop->signal_number()) +
         " without --checkpoint-dir: the progress of this run is not saved");
  m_metrics.write(JsonRecord()
                      .add("event", "stopped")
                      .add("step", done)
                      .add("epoch", epoch_of(done))
                      .add("wall_s", m_wall_offset + m_wall.seconds())
                      .add("signal", m_stop->signal_number())
                      .add("checkpoint", m_stop_checkpoint));
}

void Trainer::log_step(std::uint64_t done, double last_loss) {
  double sums[2] = {m_interval_loss, m_interval_samples};
  m_comm.allreduce(sums, 2, MPI_SUM);  // diagnostics: not part of the exchange's traffic
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : last_loss;
  // Global samples per second of training time (compute + exchange, rank 0's clock).
  const double samples_per_s = m_interval_train_s > 0 ? sums[1] / m_interval_train_s : 0.0;
  const double eta = m_train_s / static_cast<double>(done) * static_cast<double>(m_total_steps - done);
  const ExchangeStats& st = m_exchange->stats();
  m_metrics.write(JsonRecord()
                      .add("event", "train")
                      .add("step", done)
                      .add("epoch", epoch_of(done))
                      .add("wall_s", m_wall_offset + m_wall.seconds())
                      .add("lr", (*m_schedule)(done - 1))
                      .add("loss", loss)
                      .add("samples_per_s", samples_per_s)
                      .add("comm_bytes", st.total.bytes_sent)
                      .add("comm_messages", st.total.messages)
                      .add("compress_s", st.total.compress_s)
                      .add("comm_s", st.total.comm_s)
                      .add("optimizer_s", st.total.optimizer_s)
                      .add("compute_s", m_compute_s));
  m_progress->status(done, epoch_of(done), loss, samples_per_s, eta, true);
  m_last_samples_per_s = samples_per_s;
  // A record at the end of the run that is off the --log-every grid leaves the interval open, so
  // that a run resumed from the final checkpoint logs the same intervals as an uninterrupted one.
  if (done % m_config.log_every == 0) m_interval_loss = m_interval_samples = m_interval_train_s = 0.0;
}

EvalResult Trainer::evaluate(bool averaged_ready) {
  Stopwatch clock;
  EvalResult r;
  if (!averaged_ready) m_exchange->average_replicas(m_store.params(), m_averaged);
  std::tie(r.test_loss_averaged, r.test_accuracy_averaged) =
      sharded_eval(m_comm, m_exec, *m_model, m_averaged, m_data.test, m_config.eval_batch);
  if (m_comm.rank() == 0) Kokkos::deep_copy(m_replica0, m_store.params());
  broadcast_view(m_comm, m_replica0, 0);
  std::tie(r.test_loss, r.test_accuracy) =
      sharded_eval(m_comm, m_exec, *m_model, m_replica0, m_data.test, m_config.eval_batch);
  const auto [dist, norm] = distance_and_norm(m_exec, m_store.params(), m_averaged);
  double ratio = norm > 0 ? std::sqrt(dist / norm) : 0.0;
  m_comm.allreduce(&ratio, 1, MPI_MAX);
  r.replica_divergence = ratio;
  r.seconds = clock.seconds();
  // Every rank holds the same reduced values, so every rank reaches the same verdict.
  if (!std::isfinite(r.test_loss_averaged) || !std::isfinite(r.test_loss))
    throw NonFiniteError("evaluation after step " + std::to_string(m_exchange->steps()) +
                             ": the test loss is not finite (the parameters diverged)",
                         -1);
  return r;
}

void Trainer::log_eval(std::uint64_t done, const EvalResult& r) {
  m_metrics.write(JsonRecord()
                      .add("event", "eval")
                      .add("step", done)
                      .add("epoch", epoch_of(done))
                      .add("wall_s", m_wall_offset + m_wall.seconds())
                      .add("test_loss", r.test_loss)
                      .add("test_accuracy", r.test_accuracy)
                      .add("test_loss_averaged", r.test_loss_averaged)
                      .add("test_accuracy_averaged", r.test_accuracy_averaged)
                      .add("replica_divergence", r.replica_divergence)
                      .add("eval_s", r.seconds));
  char text[256];
  std::snprintf(text, sizeof text,
                "eval  step %llu  test loss %.4f  accuracy %.4f (replica 0)  %.4f (averaged)  replica divergence %.4f",
                static_cast<unsigned long long>(done), r.test_loss, r.test_accuracy, r.test_accuracy_averaged,
                r.replica_divergence);
  m_progress->line(text);
}

void Trainer::write_summary(std::uint64_t done, const EvalResult& last) {
  const ExchangeStats& st = m_exchange->stats();
  const double steps = static_cast<double>(std::max<std::uint64_t>(done, 1));
  const double wall = m_wall_offset + m_wall.seconds();
  const double bytes_per_step = static_cast<double>(st.total.bytes_sent) / steps;
  const double dense_bytes = 4.0 * static_cast<double>(m_store.size());
  JsonRecord rec;
  rec.add("event", "summary")
      .add("model", m_model->describe())
      .add("dataset", m_config.dataset)
      .add("compressor", m_exchange->name())
      .add("optimizer", to_string(m_config.optimizer.kind))
      .add("lr", m_config.lr.base_lr)
      .add("world_size", m_comm.size())
      .add("num_params", static_cast<std::int64_t>(m_store.size()))
      .add("batch_size", static_cast<std::int64_t>(m_config.batch_size))
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
      .add("bytes_per_step", bytes_per_step)
      .add("dense_bytes_per_step", dense_bytes)
      .add("reduction_factor", bytes_per_step > 0 ? dense_bytes / bytes_per_step : 0.0)
      .add("test_loss", last.test_loss)
      .add("test_accuracy", last.test_accuracy)
      .add("test_loss_averaged", last.test_loss_averaged)
      .add("test_accuracy_averaged", last.test_accuracy_averaged)
      .add("replica_divergence", last.replica_divergence);
  for (const auto& [key, value] : m_exchange->options()) rec.add("a2sgd_" + key, value);
  m_metrics.write(rec);
  if (m_comm.rank() == 0 && !m_config.quiet) {
    std::printf(
        "done: %llu steps in %.1f s; %.3f ms per step (compute %.3f, compress %.3f, communication %.3f, "
        "optimizer %.3f)\n",
        static_cast<unsigned long long>(done), wall, 1e3 * m_train_s / steps, 1e3 * m_compute_s / steps,
        1e3 * st.total.compress_s / steps, 1e3 * st.total.comm_s / steps, 1e3 * st.total.optimizer_s / steps);
    std::printf("      %.0f bytes per step per rank handed to MPI (dense all-reduce: %.0f, %.1fx less)\n",
                bytes_per_step, dense_bytes, bytes_per_step > 0 ? dense_bytes / bytes_per_step : 0.0);
    std::printf("      test accuracy %.4f (replica 0), %.4f (averaged model)\n", last.test_accuracy,
                last.test_accuracy_averaged);
  }
}

// ---- checkpoints ----

namespace {

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

}  // namespace

io::CheckpointMetadata Trainer::checkpoint_metadata(std::uint64_t done) const {
  io::CheckpointMetadata m;
  m.library_version = version();
  m.model = m_model->describe();
  m.layout = m_store.describe();
  m.compressor = m_exchange->name();
  m.compressor_options = join_options(m_exchange->options());
  m.optimizer = to_string(m_config.optimizer.kind);
  m.optimizer_options = optimizer_options(m_config.optimizer);
  m.dataset = m_config.dataset;
  m.world_size = m_comm.size();
  m.num_params = m_store.size();
  m.batch_size = m_config.batch_size;
  m.seed = m_config.seed;
  m.step = done;
  m.epoch = done / m_steps_per_epoch;
  m.samples_in_epoch = (done % m_steps_per_epoch) * static_cast<std::uint64_t>(m_config.batch_size) *
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
  st.optimizer_steps = m_optimizer->steps();
  st.exchange_steps = m_exchange->steps();
  const ExchangeStats& x = m_exchange->stats();
  st.scalars = {{"interval_loss", m_interval_loss},
                {"interval_samples", m_interval_samples},
                {"exchange_bytes", static_cast<double>(x.total.bytes_sent)},
                {"exchange_messages", static_cast<double>(x.total.messages)}};
  st.timers = {{"interval_train_s", m_interval_train_s},
               {"last_samples_per_s", m_last_samples_per_s},
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
  m_metrics.write(JsonRecord()
                      .add("event", "checkpoint")
                      .add("step", done)
                      .add("file", path)
                      .add("bytes", bytes)
                      .add("write_s", seconds));
  char text[512];
  std::snprintf(text, sizeof text, "checkpoint  step %llu  %s  (%.1f MB in %.3f s)",
                static_cast<unsigned long long>(done), path.c_str(), static_cast<double>(bytes) / 1e6, seconds);
  m_progress->line(text);
  return path;
}

void Trainer::warn(const std::string& text) {
  if (m_comm.rank() != 0) return;
  m_progress->line("");  // clears a live progress bar
  std::fprintf(stderr, "a2sgd-train: warning: %s\n", text.c_str());
  std::fflush(stderr);
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

void Trainer::resume() {
  const TrainConfig& c = m_config;
  Stopwatch clock;
  const std::string path = c.resume == "auto" ? find_resume_file() : c.resume;
  if (path.empty()) {
    m_progress->line("no checkpoint in " + c.checkpoint_dir + ": starting from step 0");
    return;
  }
  const io::CheckpointMetadata meta = io::read_checkpoint_metadata(m_comm, path);
  m_comm.all_or_throw([&] {
    if (meta.num_params != m_store.size() || meta.layout != m_store.describe())
      throw InvalidArgument("checkpoint " + path + " was written for model '" + meta.model + "' (" +
                            std::to_string(meta.num_params) + " parameters); this run builds '" + m_model->describe() +
                            "' (" + std::to_string(m_store.size()) + " parameters)");
    if (meta.compressor != m_exchange->name())
      throw InvalidArgument("checkpoint " + path + " holds the state of compressor '" + meta.compressor +
                            "'; this run uses '" + m_exchange->name() + "' (--compressor " + meta.compressor +
                            " to continue it)");
    if (meta.optimizer != to_string(c.optimizer.kind))
      throw InvalidArgument("checkpoint " + path + " holds the state of optimizer '" + meta.optimizer +
                            "'; this run uses '" + to_string(c.optimizer.kind) + "' (--optimizer " + meta.optimizer +
                            " to continue it)");
  });
  auto note = [&](bool differs, const std::string& what) {
    if (differs) warn(what + " differs from the checkpoint's; continuing with this run's");
  };
  note(meta.dataset != c.dataset, "--dataset");
  note(meta.seed != c.seed, "--seed (data order)");
  note(meta.batch_size != c.batch_size, "--batch-size");
  note(meta.compressor_options != join_options(m_exchange->options()), "the exchange options");
  note(meta.optimizer_options != optimizer_options(c.optimizer), "the optimizer options");

  io::CheckpointState st = checkpoint_state();
  if (!c.eval_only) st.averaged = FloatView();  // a restart recomputes it when it evaluates
  io::read_checkpoint(m_comm, path, meta, st);
  auto scalar = [&](const char* name) {
    for (const auto* list : {&st.scalars, &st.timers})
      for (const auto& [k, v] : *list)
        if (k == name) return v;
    return 0.0;
  };
  const bool same_world = meta.world_size == m_comm.size();
  // Same world size: continue exactly at the checkpoint's step. Otherwise continue in the same
  // epoch at the same fraction of its samples.
  m_start_step = same_world ? meta.step
                            : meta.epoch * m_steps_per_epoch +
                                  meta.samples_in_epoch / (static_cast<std::uint64_t>(c.batch_size) * m_comm.size());
  m_optimizer->set_steps(st.optimizer_steps);
  ExchangeStats x;
  x.steps = same_world ? st.exchange_steps : m_start_step;
  x.total.bytes_sent = static_cast<std::uint64_t>(scalar("exchange_bytes"));
  x.total.messages = static_cast<std::uint64_t>(scalar("exchange_messages"));
  x.total.compress_s = scalar("exchange_compress_s");
  x.total.comm_s = scalar("exchange_comm_s");
  x.total.optimizer_s = scalar("exchange_optimizer_s");
  m_exchange->restore_stats(x);
  m_interval_loss = scalar("interval_loss");
  m_interval_samples = scalar("interval_samples");
  m_interval_train_s = scalar("interval_train_s");
  m_last_samples_per_s = scalar("last_samples_per_s");
  m_compute_s = scalar("compute_s");
  m_train_s = scalar("train_s");
  m_wall_offset = scalar("wall_s");
  const double seconds = clock.seconds();
  m_metrics.write(JsonRecord()
                      .add("event", "resume")
                      .add("step", m_start_step)
                      .add("file", path)
                      .add("from_world_size", meta.world_size)
                      .add("read_s", seconds));
  char text[512];
  std::snprintf(text, sizeof text, "resumed from %s (step %llu, %lld ranks%s) in %.3f s", path.c_str(),
                static_cast<unsigned long long>(m_start_step), static_cast<long long>(meta.world_size),
                same_world ? "" : ", elastic restart", seconds);
  m_progress->line(text);
}

void Trainer::run_eval_only() {
  // The averaged model is the one stored in the checkpoint: the exact vector its run evaluated.
  const EvalResult r = evaluate(true);
  log_eval(m_start_step, r);
}

}  // namespace a2sgd::train
