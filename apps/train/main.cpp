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
#include "Reporter.hpp"
#include "TrainConfig.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace a2sgd;

namespace {

void report(const Communicator& comm, const std::string& message) {
  if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-train: %s\n", message.c_str());
}

// What the command line asks to train: the data source and the model over `store`.
struct Problem {
  std::unique_ptr<train::DataSource> data;
  std::unique_ptr<nn::Model> model;
  std::string sizes;  // for the banner
};

Problem build_problem(const train::TrainConfig& c, const Communicator& comm, ParameterStore& store) {
  Problem pb;
  if (c.model == "lstm") {
    const std::string dir = data::ptb_directory(c.data_dir);
    if (dir.empty()) throw InvalidArgument("--dataset ptb needs --data-dir or A2SGD_DATA_DIR");
    const data::TokenCorpus corpus = data::load_ptb(dir);
    pb.data = std::make_unique<train::TokenStreamSource>(corpus, c.dataset, comm.rank(), comm.size(), c.batch_size,
                                                         c.eval_batch, c.bptt);
    nn::LstmConfig lc;
    lc.vocab = corpus.vocab.size();
    lc.embedding = lc.hidden = c.hidden.front();
    lc.layers = c.layers;
    lc.dropout = static_cast<float>(c.dropout);
    lc.tie_weights = c.tie_weights;
    pb.model = std::make_unique<nn::LstmLanguageModel>(lc, store);
    pb.sizes = std::to_string(corpus.train.size()) + " / " + std::to_string(corpus.valid.size()) + " / " +
               std::to_string(corpus.test.size()) + " train / valid / test tokens, " +
               std::to_string(corpus.vocab.size()) + " words";
  } else {
    data::DatasetPair d =
        c.dataset == "synthetic" ? data::make_synthetic(c.synthetic) : data::load_idx_dataset(c.data_dir, c.dataset);
    pb.sizes = std::to_string(d.train.size()) + " train / " + std::to_string(d.test.size()) + " test samples";
    nn::MlpConfig mc{d.train.features(), c.hidden, static_cast<Index>(d.train.num_classes), c.init};
    pb.data = std::make_unique<train::ClassificationSource>(std::move(d), comm.rank(), comm.size(), c.batch_size,
                                                            c.eval_batch, c.seed);
    pb.model = std::make_unique<nn::Mlp>(mc, store);
  }
  return pb;
}

int run(int argc, char** argv, const Communicator& comm) {
  train::TrainConfig config;
  std::string help;
  train::ParseOutcome outcome = train::ParseOutcome::run;
  try {
    comm.all_or_throw([&] { outcome = train::parse_options(argc, argv, config, help); });
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what() + " (see --help)");
    return 2;
  }
  if (outcome == train::ParseOutcome::help) {
    if (comm.rank() == 0) std::cout << help << '\n';
    return 0;
  }
  if (outcome == train::ParseOutcome::version) {
    if (comm.rank() == 0) std::cout << build_info();
    return 0;
  }
  const train::TrainConfig& c = config;
  // Every collective of the run reports its waits to the watchdog (attached before StopSignals
  // duplicates the communicator, detached before it is destroyed).
  CollectiveWatchdog watchdog(c.collective_timeout, comm.rank());
  struct Attach {
    const Communicator& comm;
    ~Attach() { comm.set_watchdog(nullptr); }
  } attach{comm};
  comm.set_watchdog(&watchdog);
  // Installed first, so that a signal during data loading or a resume is not fatal either.
  StopSignals stop(comm);
  ParameterStore store;
  Problem pb;
  std::unique_ptr<train::Reporter> reporter;
  std::uint64_t total_steps = 0, steps_per_epoch = 0;
  try {
    comm.all_or_throw([&] {
      pb = build_problem(c, comm, store);
      steps_per_epoch = pb.data->steps_per_epoch();
      total_steps = c.steps > 0 ? c.steps : c.epochs * steps_per_epoch;
      reporter = std::make_unique<train::Reporter>(comm.rank() == 0, c.quiet, c.progress_bar, total_steps,
                                                   (total_steps + steps_per_epoch - 1) / steps_per_epoch);
      // Output files are rank 0's; its failure to create them fails every rank.
      std::string metrics_path = c.metrics;
      if (metrics_path.empty() && !c.output_dir.empty()) metrics_path = c.output_dir + "/metrics.jsonl";
      if (comm.rank() == 0) {
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
          if (!reporter->metrics().good())
            throw InvalidArgument("--metrics " + metrics_path + ": cannot open for writing");
        }
      }
    });
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return 2;
  }
  if (comm.rank() == 0 && !c.quiet) {
    std::printf("a2sgd-train: %s on %s (%s), %lld parameters, %d ranks\n", pb.model->describe().c_str(),
                c.dataset.c_str(), pb.sizes.c_str(), static_cast<long long>(store.size()), comm.size());
    std::printf("  exchange %s, optimizer %s, lr %g (%s), batch %lld per rank, %llu steps (%llu per epoch)\n",
                c.exchange.method.c_str(), to_string(c.optimizer.kind).c_str(), c.lr.base_lr,
                to_string(c.lr.kind).c_str(), static_cast<long long>(c.batch_size),
                static_cast<unsigned long long>(total_steps), static_cast<unsigned long long>(steps_per_epoch));
    std::fflush(stdout);
  }

  train::Trainer trainer(c.trainer(), comm, *pb.model, store, *pb.data, reporter.get(), &stop);
  try {
    trainer.setup();
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return 2;
  }
  // A metrics file that could not be written (disk full) fails the run on every rank at its end.
  auto metrics_lost = [&] {
    double lost = comm.rank() == 0 && !reporter->metrics().error().empty() ? 1.0 : 0.0;
    comm.allreduce(&lost, 1, MPI_MAX);
    if (lost > 0)
      report(comm, "error: --metrics " + reporter->metrics().path() + ": writing failed (" +
                       reporter->metrics().error() + "); the metrics of this run are incomplete");
    return lost > 0;
  };
  try {
    if (trainer.run() == train::Trainer::Outcome::stopped) {
      const std::string& file = trainer.stop_checkpoint();
      report(comm, "stopped by signal " + std::to_string(trainer.stop_signal()) + " (" +
                       strsignal(trainer.stop_signal()) + "); " +
                       (file.empty() ? std::string("nothing saved (no --checkpoint-dir)")
                                     : "state saved in " + file + ": continue with --resume auto") +
                       " (exit code " + std::to_string(exit_code_requeue) + ")");
      // mpirun takes the job down when the first rank exits non-zero: no rank leaves before rank 0
      // has reported.
      comm.barrier();
      return metrics_lost() ? 2 : exit_code_requeue;
    }
  } catch (const NonFiniteError& e) {
    char hint[96];
    std::snprintf(hint, sizeof hint, ". Try a smaller learning rate (e.g. --lr %g).", config.lr.base_lr / 10);
    report(comm, std::string("training diverged: ") + e.what() + hint);
    return 3;
  } catch (const DivergenceError& e) {
    // Drift, not overflow: what helps is averaging the replicas or a smaller step.
    report(comm, std::string("training stopped (--stop-on-divergence): ") + e.what() +
                     (config.exchange.method == "a2sgd"
                          ? ". Average the replicas periodically (--a2sgd-average-every K) or lower --lr."
                          : ". Try a smaller learning rate."));
    return 3;
  } catch (const IoError& e) {
    report(comm, std::string("error: ") + e.what() + " (exit code " + std::to_string(exit_code_io) + ")");
    return exit_code_io;
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return 1;
  }
  return metrics_lost() ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-train", run);
}
