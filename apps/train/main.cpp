// a2sgd-train: data-parallel training of an image classifier (MLP) or a word-level language model
// (LSTM on Penn Treebank) with A2SGD, dense all-reduce or a baseline compressor.
//
// Exit codes: 0 success, 2 invalid options or input data, 3 training diverged, 75 stopped by a
// signal (SIGUSR1/SIGTERM) after writing a checkpoint: requeue and --resume auto, 74 a checkpoint
// could not be written (disk full, quota, I/O error; the previous ones are intact), 76 a rank
// waited in a collective for longer than --collective-timeout (another rank stopped or died:
// requeue and --resume auto), 1 other errors;
// 128 + n: a second signal n ended the run at once. Every error is reported once (by rank 0) and
// every rank exits with the same code.
#include "../common/AppMain.hpp"
#include "../common/ExitCodes.hpp"
#include "Reporter.hpp"
#include "TrainConfig.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace a2sgd;

namespace {

void report(const Communicator& comm, const std::string& message) {
  if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-train: %s\n", message.c_str());
}

// What the command line asks to train: the registered model over `store`, and its data.
train::ModelProblem build_problem(const train::TrainConfig& c, const Communicator& comm, ParameterStore& store) {
  return train::model_kind(c.model).build(
      train::ModelContext{comm, c.model_options, c.dataset, c.data_dir, c.batch_size, c.eval_batch, c.seed}, store);
}

// --list-methods and --list-models: one line each, the name first (scripts take the first word).
void list(train::ParseOutcome what) {
  if (what == train::ParseOutcome::list_methods)
    for (const auto& m : exchange_registry()) std::cout << m.name << '\t' << m.summary << '\n';
  else
    for (const auto& k : train::model_registry()) {
      std::string datasets;
      for (const auto& d : k.datasets) datasets += (datasets.empty() ? "" : ",") + d;
      std::cout << k.name << '\t' << datasets << '\t' << k.summary << '\n';
    }
}

// Options: 0 to go on, else the exit code (--help, --version and the lists end here).
int parse(int argc, char** argv, const Communicator& comm, train::TrainConfig& config) {
  std::string help;
  train::ParseOutcome outcome = train::ParseOutcome::run;
  try {
    comm.all_or_throw([&] { outcome = train::parse_options(argc, argv, config, help); });
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what() + " (see --help)");
    return apps::exit_input;
  }
  if (outcome == train::ParseOutcome::run) return 0;
  if (comm.rank() == 0) {
    if (outcome == train::ParseOutcome::help) std::cout << help << '\n';
    if (outcome == train::ParseOutcome::version) std::cout << build_info();
    if (outcome == train::ParseOutcome::list_methods || outcome == train::ParseOutcome::list_models) list(outcome);
  }
  return -1;
}

// The reporter and rank 0's output files (config.ini, the metrics file); rank 0's failure to
// create them fails every rank.
std::unique_ptr<train::Reporter> open_outputs(const train::TrainConfig& c, const Communicator& comm,
                                              std::uint64_t total_steps, std::uint64_t steps_per_epoch) {
  auto reporter = std::make_unique<train::Reporter>(comm.rank() == 0, c.quiet, c.progress_bar, total_steps,
                                                    (total_steps + steps_per_epoch - 1) / steps_per_epoch);
  std::string metrics_path = c.metrics;
  if (metrics_path.empty() && !c.output_dir.empty()) metrics_path = c.output_dir + "/metrics.jsonl";
  if (comm.rank() != 0) return reporter;
  if (!c.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.output_dir, ec);
    if (ec) throw InvalidArgument("--output-dir " + c.output_dir + ": " + ec.message());
    std::ofstream ini(c.output_dir + "/config.ini");
    ini << c.to_ini();
    if (!ini) throw InvalidArgument("--output-dir " + c.output_dir + ": cannot write config.ini");
  }
  if (!metrics_path.empty()) {
    reporter->metrics().open(metrics_path, !c.resume.empty());
    if (!reporter->metrics().good()) throw InvalidArgument("--metrics " + metrics_path + ": cannot open for writing");
  }
  return reporter;
}

void banner(const train::TrainConfig& c, const Communicator& comm, const train::ModelProblem& pb,
            const ParameterStore& store, std::uint64_t total_steps, std::uint64_t steps_per_epoch) {
  if (comm.rank() != 0 || c.quiet) return;
  std::printf("a2sgd-train: %s on %s (%s), %lld parameters, %d ranks\n", pb.model->describe().c_str(),
              c.dataset.c_str(), pb.sizes.c_str(), static_cast<long long>(store.size()), comm.size());
  const std::string warmup =
      c.lr.warmup_steps ? ", warmed up over " + std::to_string(c.lr.warmup_steps) + " steps" : std::string();
  std::printf("  exchange %s, optimizer %s, lr %g (%s%s), batch %lld per rank, %llu steps (%llu per epoch)\n",
              c.exchange.method.c_str(), to_string(c.optimizer.kind).c_str(), c.lr.base_lr,
              to_string(c.lr.kind).c_str(), warmup.c_str(), static_cast<long long>(c.batch_size),
              static_cast<unsigned long long>(total_steps), static_cast<unsigned long long>(steps_per_epoch));
  const AveragingOptions& a = c.exchange.common.averaging;
  if (a.every == 0) {
    std::printf("  replicas averaged only at evaluations and at the end (--average-every 0)\n");
  } else {
    std::string outer = "plain average";
    if (a.outer != OuterOptimizer::average) {
      char text[128];
      std::snprintf(text, sizeof text, "outer %s, lr %g, momentum %g", to_string(a.outer).c_str(), a.outer_lr,
                    a.outer_momentum);
      outer = text;
    }
    std::printf("  replicas averaged every %llu steps (%s; optimizer's first moment: %s)\n",
                static_cast<unsigned long long>(a.every), outer.c_str(), to_string(a.state_at_average).c_str());
  }
  std::fflush(stdout);
}

// The gradient's buckets, where the method exchanges more than one (BucketOptions).
void bucket_line(const train::TrainConfig& c, const Communicator& comm, const Exchange& exchange) {
  const std::vector<GradientRange>& buckets = exchange.buckets();
  if (comm.rank() != 0 || c.quiet) return;
  if (buckets.size() < 2) {
    // The Trainer plans no buckets under clipping (Trainer.cpp): say why, where the method has them.
    if (c.clip > 0.0 && exchange.exchanges_buckets() && c.exchange.common.buckets.overlap)
      std::printf(
          "  gradient exchanged whole after the backward pass (clipping needs it whole; --clip 0 "
          "overlaps its buckets with the backward pass)\n");
    std::fflush(stdout);
    return;
  }
  std::string sizes;
  for (const GradientRange& b : buckets) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b.size());
  const bool overlap = c.exchange.common.buckets.overlap;
  std::printf("  gradient in %zu buckets of %s values, %s\n", buckets.size(), sizes.c_str(),
              overlap ? "each exchanged during the backward pass as it completes (--overlap on)"
                      : "exchanged after the backward pass (--overlap off)");
  std::fflush(stdout);
}

// The library's errors of a run in the command line's words, as exit codes (docs/training.md).
int train_and_report(train::Trainer& trainer, const train::TrainConfig& c, const Communicator& comm) {
  try {
    if (trainer.run() == train::Trainer::Outcome::finished) return apps::exit_ok;
    const std::string& file = trainer.stop_checkpoint();
    report(comm, "stopped by signal " + std::to_string(trainer.stop_signal()) + " (" +
                     strsignal(trainer.stop_signal()) + "); " +
                     (file.empty() ? std::string("nothing saved (no --checkpoint-dir)")
                                   : "state saved in " + file + ": continue with --resume auto") +
                     " (exit code " + std::to_string(apps::exit_requeue) + ")");
    // mpirun takes the job down when the first rank exits non-zero: no rank leaves before rank 0
    // has reported.
    comm.barrier();
    return apps::exit_requeue;
  } catch (const NonFiniteError& e) {
    char hint[96];
    std::snprintf(hint, sizeof hint, ". Try a smaller learning rate (e.g. --lr %g).", c.lr.base_lr / 10);
    report(comm, std::string("training diverged: ") + e.what() + hint);
    return apps::exit_diverged;
  } catch (const DivergenceError& e) {
    // Drift, not overflow: what helps is averaging the replicas or a smaller step.
    report(comm, std::string("training stopped (--stop-on-divergence): ") + e.what() +
                     (c.exchange.method == "a2sgd" || c.exchange.method == "local"
                          ? ". Average the replicas more often (--average-every K) or lower --lr."
                          : ". Try a smaller learning rate."));
    return apps::exit_diverged;
  } catch (const IoError& e) {
    report(comm, std::string("error: ") + e.what() + " (exit code " + std::to_string(apps::exit_io) + ")");
    return apps::exit_io;
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return apps::exit_error;
  }
}

// A metrics file that could not be written (disk full) fails the run on every rank at its end.
bool metrics_lost(const Communicator& comm, train::Reporter& reporter) {
  double lost = comm.rank() == 0 && !reporter.metrics().error().empty() ? 1.0 : 0.0;
  comm.allreduce(&lost, 1, MPI_MAX);
  if (lost > 0)
    report(comm, "error: --metrics " + reporter.metrics().path() + ": writing failed (" + reporter.metrics().error() +
                     "); the metrics of this run are incomplete");
  return lost > 0;
}

int run(int argc, char** argv, const Communicator& comm) {
  train::TrainConfig c;
  if (const int code = parse(argc, argv, comm, c); code != 0) return code < 0 ? apps::exit_ok : code;
  // Every collective of the run reports its waits to the watchdog (attached before StopSignals
  // duplicates the communicator, detached before it is destroyed). A stalled rank reports and ends
  // with the code the job scripts requeue on.
  CollectiveWatchdog watchdog(c.collective_timeout, comm.rank(), [](const std::string& message) {
    std::fprintf(stderr, "%s (--collective-timeout); exiting with code %d so that the job can be requeued\n",
                 message.c_str(), apps::exit_stalled);
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(apps::exit_stalled);
  });
  struct Attach {
    const Communicator& comm;
    ~Attach() { comm.set_watchdog(nullptr); }
  } attach{comm};
  comm.set_watchdog(&watchdog);
  // Installed first, so that a signal during data loading or a resume is not fatal either.
  StopSignals stop(comm);
  ParameterStore store;
  train::ModelProblem pb;
  std::unique_ptr<train::Reporter> reporter;
  std::uint64_t total_steps = 0, steps_per_epoch = 0;
  try {
    comm.all_or_throw([&] {
      pb = build_problem(c, comm, store);
      steps_per_epoch = pb.data->steps_per_epoch();
      total_steps = c.steps > 0 ? c.steps : c.epochs * steps_per_epoch;
      reporter = open_outputs(c, comm, total_steps, steps_per_epoch);
    });
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return apps::exit_input;
  }
  banner(c, comm, pb, store, total_steps, steps_per_epoch);
  train::Trainer trainer(c.trainer(), comm, *pb.model, store, *pb.data, reporter.get(), &stop);
  try {
    trainer.setup();
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return apps::exit_input;
  }
  bucket_line(c, comm, trainer.exchange());
  const int code = train_and_report(trainer, c, comm);
  if (code != apps::exit_ok && code != apps::exit_requeue) return code;
  return metrics_lost(comm, *reporter) ? apps::exit_input : code;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-train", run);
}
