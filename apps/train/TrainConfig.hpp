#pragma once
// Options of a2sgd-train: command line, INI config file, validation.

#include <a2sgd/a2sgd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace a2sgd::train {

struct TrainConfig {
  // model (a registered one: a2sgd/train/ModelRegistry.hpp) and its data
  std::string model = "mlp";
  OptionValues model_options;  // the model's own options
  std::string dataset;         // one of the model's datasets
  std::string data_dir;        // empty: the dataset's default
  // schedule of the run
  std::uint64_t epochs = 3;
  std::uint64_t steps = 0;  // > 0 overrides epochs
  Index batch_size = 64;    // per rank
  std::uint64_t seed = 1;
  // optimisation
  OptimizerConfig optimizer;
  LrScheduleConfig lr;
  ExchangeConfig exchange;                                   // the method and its options as the run uses them
  std::map<std::string, OptionValues> other_method_options;  // the other methods' options as given
  OptionValues averaging_options;                            // the averaging policy's, as the run uses them
  double clip = 0.0;                                         // global-norm clipping of each rank's gradient (0: off)
  double divergence_threshold = 0.5;                         // replica divergence that warns (0: off)
  std::uint64_t divergence_patience = 3;                     // rising evaluations that warn (0: off)
  double divergence_gap = 0.05;         // averaged loss above the replica's by this fraction warns (0: off)
  std::uint64_t diagnostics_every = 0;  // steps between diagnostics records (0: off)
  std::optional<Link> model_link;       // the summary's modelled_comm_s_per_step on this link
  std::vector<Link> projection_links;   // the summary's modelled_comm_s_p<P>_<G>gbps: links...
  std::vector<int> projection_ranks;    // ...and rank counts (defaults: --help)
  bool stop_on_divergence = false;
  double collective_timeout = 300.0;  // seconds one collective may wait before the rank gives up (0: off)
  // output
  std::optional<std::uint64_t> eval_every;  // unset: once per epoch; 0: once at the end
  std::uint64_t log_every = 50;
  Index eval_batch = 1000;  // samples, or token columns per rank (lstm)
  std::string output_dir;
  std::string metrics;
  bool quiet = false;
  bool progress_bar = true;
  // checkpoints
  std::string checkpoint_dir;
  std::uint64_t checkpoint_every = 0;  // 0: only the final checkpoint
  std::uint64_t keep_checkpoints = 3;  // 0: keep all
  std::string resume;                  // "", "auto" or a file
  bool eval_only = false;
  std::vector<std::string> resume_overrides;  // settings allowed to differ on resume

  /// The options as an INI file that --config reads back.
  std::string to_ini() const;
  /// The library trainer's part of the options.
  TrainerConfig trainer() const;
};

/// What parse_options() decided besides the configuration.
enum class ParseOutcome { run, help, version, list_methods, list_models };

/// Parses argv (and --config FILE; the command line wins over the file). Throws InvalidArgument
/// with the option named for every invalid value. `help_text` receives --help output.
ParseOutcome parse_options(int argc, char** argv, TrainConfig& config, std::string& help_text);

}  // namespace a2sgd::train
