// a2sgd-train: data-parallel training of a classifier with A2SGD or dense all-reduce.
//
// Exit codes: 0 success, 2 invalid options or input data, 3 training diverged, 75 stopped by a
// signal (SIGUSR1/SIGTERM) after writing a checkpoint: requeue and --resume auto, 1 other errors;
// 128 + n: a second signal n ended the run at once. Every error is reported once (by rank 0) and
// every rank exits with the same code.
#include "../common/AppMain.hpp"
#include "TrainConfig.hpp"
#include "Trainer.hpp"

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

using namespace a2sgd;

namespace {

void report(const Communicator& comm, const std::string& message) {
  if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-train: %s\n", message.c_str());
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

  train::Trainer trainer(config, comm);
  try {
    trainer.setup();
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return 2;
  }
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
      return exit_code_requeue;
    }
  } catch (const NonFiniteError& e) {
    char hint[96];
    std::snprintf(hint, sizeof hint, ". Try a smaller learning rate (e.g. --lr %g).", config.lr.base_lr / 10);
    report(comm, std::string("training diverged: ") + e.what() + hint);
    return 3;
  } catch (const CollectiveError& e) {
    report(comm, std::string("error: ") + e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-train", run);
}
