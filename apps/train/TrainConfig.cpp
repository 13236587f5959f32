#include "TrainConfig.hpp"

#include "../common/OptionErrors.hpp"

#include <boost/program_options.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <vector>

namespace po = boost::program_options;

namespace a2sgd::train {
namespace {

std::vector<Index> parse_widths(const std::string& text) {
  std::vector<Index> widths;
  if (text.empty() || text == "none") return widths;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < 1)
      throw InvalidArgument("--hidden: \"" + text + "\" is not a comma-separated list of positive widths");
    widths.push_back(static_cast<Index>(v));
  }
  return widths;
}

bool parse_switch(const std::string& name, const std::string& v) {
  if (v == "on" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "off" || v == "false" || v == "0" || v == "no") return false;
  throw InvalidArgument("--" + name + ": \"" + v + "\" is not on/off");
}

template <class T>
void require(bool ok, const std::string& option, const T& value, const std::string& rule) {
  if (!ok) {
    std::ostringstream out;
    out << "--" << option << " " << value << ": " << rule;
    throw InvalidArgument(out.str());
  }
}

std::string join(const std::vector<Index>& v) {
  std::string s;
  for (Index x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s.empty() ? "none" : s;
}

// A config file's text: a regular, readable file of text (no NUL or other control bytes but
// tab, line feed and carriage return).
std::string read_config_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InvalidArgument("--config " + path + ": " +
                          (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw InvalidArgument("--config " + path + ": cannot read it");
  std::size_t line = 1;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte == '\n') ++line;
    if (byte < 0x20 && byte != '\n' && byte != '\t' && byte != '\r')
      throw InvalidArgument("--config " + path + ": line " + std::to_string(line) +
                            " holds a control byte (not a text file?)");
  }
  return text;
}

}  // namespace

ParseOutcome parse_options(int argc, char** argv, TrainConfig& c, std::string& help_text) {
  // Signed types for sizes so that "-5" is rejected with a message instead of wrapping around.
  std::string hidden = "256,256", init = "he", optimizer, schedule = "constant", compressor = "a2sgd";
  std::string averaging = "mean", residual = "local", error_feedback = "on", config_file, granularity = "model";
  std::string moments = "local", resume_override, zero_gradient = "move", model_link;
  long long epochs = 3, steps = 0, batch = 64, eval_every = -1, log_every = 50, warmup = 0, lr_warmup = 0;
  long long lr_step_size = 1000, average_every = 0, eval_batch = 1000, seed = 1;
  long long checkpoint_every = 0, keep_checkpoints = 3;
  long long syn_train = 20000, syn_test = 4000, syn_features = 784, syn_classes = 10;
  long long divergence_patience = 3, diagnostics_every = 0;
  long long qsgd_levels = 256, powersgd_rank = 2, layers = 2, bptt = 35;
  double lr = -1.0, momentum = 0.9, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, gamma = 0.1,
         lr_min = 0.0, separation = 3.0, topk_ratio = 0.001, randomk_ratio = 0.001, dropout = 0.0, clip = -1.0,
         plateau_divisor = 4.0;
  bool nesterov = false, gpu_aware = false, tie_weights = false;

  po::options_description general("General");
  general.add_options()("help,h", "show this help and exit")("version", "show versions and exit")(
      "config", po::value(&config_file), "INI file with option=value lines (command line wins)")(
      "seed", po::value(&seed)->default_value(seed), "seed of initialisation, data order and synthetic data");
  po::options_description model("Model and data");
  model.add_options()("model", po::value(&c.model)->default_value(c.model),
                      "mlp (image classifier) | lstm (word-level language model, --dataset ptb)")(
      "hidden", po::value(&hidden)->default_value(hidden),
      "mlp: hidden layer widths, comma-separated ('none': linear); lstm: the hidden width (default 200)")(
      "init", po::value(&init)->default_value(init), "weight initialisation: he | xavier")(
      "layers", po::value(&layers)->default_value(layers), "lstm: LSTM layers")(
      "bptt", po::value(&bptt)->default_value(bptt), "lstm: time steps per batch (truncated back-propagation)")(
      "dropout", po::value(&dropout)->default_value(dropout),
      "lstm: dropout probability on the embedding and every layer's output")(
      "tie-weights", po::bool_switch(&tie_weights), "lstm: decoder weights shared with the embedding")(
      "dataset", po::value(&c.dataset)->default_value(c.dataset),
      "fashion-mnist | mnist | synthetic (mlp); ptb (lstm)")(
      "data-dir", po::value(&c.data_dir),
      "directory of the IDX files (default for fashion-mnist: /usr/share/datasets/fashion-mnist) or of "
      "ptb.{train,valid,test}.txt (default: $A2SGD_DATA_DIR/ptb)")(
      "synthetic-train", po::value(&syn_train)->default_value(syn_train), "synthetic: training samples")(
      "synthetic-test", po::value(&syn_test)->default_value(syn_test), "synthetic: test samples")(
      "synthetic-features", po::value(&syn_features)->default_value(syn_features), "synthetic: features")(
      "synthetic-classes", po::value(&syn_classes)->default_value(syn_classes), "synthetic: classes")(
      "synthetic-separation", po::value(&separation)->default_value(separation),
      "synthetic: spread of the class centres (larger is easier)");
  po::options_description run("Training");
  run.add_options()("epochs", po::value(&epochs)->default_value(epochs), "epochs over each rank's shard")(
      "steps", po::value(&steps)->default_value(steps), "total steps (> 0 overrides --epochs)")(
      "batch-size", po::value(&batch)->default_value(batch),
      "mini-batch size per rank (lstm: token columns; default 20)")(
      "optimizer", po::value(&optimizer), "sgd | momentum | adam (default: momentum for a dense mlp, sgd otherwise)")(
      "lr", po::value(&lr), "learning rate (default: mlp 0.05 dense, 0.1 otherwise; lstm 20)")(
      "lr-schedule", po::value(&schedule)->default_value(schedule),
      "constant | step | cosine | plateau (divide by --lr-plateau-divisor when the first evaluation split's "
      "loss stops improving; default for lstm)")("lr-plateau-divisor",
                                                 po::value(&plateau_divisor)->default_value(plateau_divisor),
                                                 "plateau schedule: divisor of the learning rate")(
      "clip", po::value(&clip), "clip each rank's gradient to this global L2 norm (default: lstm 0.25, mlp off)")(
      "lr-warmup-steps", po::value(&lr_warmup)->default_value(lr_warmup), "linear learning-rate warm-up steps")(
      "lr-step-size", po::value(&lr_step_size)->default_value(lr_step_size), "step schedule: steps between decays")(
      "lr-gamma", po::value(&gamma)->default_value(gamma), "step schedule: decay factor")(
      "lr-min", po::value(&lr_min)->default_value(lr_min), "cosine schedule: final learning rate")(
      "momentum", po::value(&momentum)->default_value(momentum), "momentum coefficient")(
      "nesterov", po::bool_switch(&nesterov), "Nesterov momentum")(
      "weight-decay", po::value(&weight_decay)->default_value(weight_decay), "decoupled weight decay")(
      "beta1", po::value(&beta1)->default_value(beta1), "adam beta1")(
      "beta2", po::value(&beta2)->default_value(beta2), "adam beta2")("adam-eps", po::value(&eps)->default_value(eps),
                                                                      "adam epsilon");
  po::options_description exch("Gradient exchange");
  exch.add_options()("compressor", po::value(&compressor)->default_value(compressor),
                     "dense | a2sgd | topk | randomk | qsgd | efsign | powersgd | fp16 | bf16")(
      "a2sgd-averaging", po::value(&averaging)->default_value(averaging), "mean (2 scalars) | weighted (4 scalars)")(
      "a2sgd-residual", po::value(&residual)->default_value(residual), "residual reference: local | global")(
      "a2sgd-granularity", po::value(&granularity)->default_value(granularity),
      "model (2 scalars per step) | layer (2 per tensor, one all-reduce); lstm default: layer")(
      "a2sgd-error-feedback", po::value(&error_feedback)->default_value(error_feedback), "on | off")(
      "a2sgd-zero-gradient", po::value(&zero_gradient)->default_value(zero_gradient),
      "entries whose gradient (direction) is exactly 0: move (classed by the residual's sign) | hold (left out "
      "of the step: no move, residual kept); lstm default: hold")("a2sgd-warmup-steps", po::value(&warmup)->default_value(warmup),
                                              "first steps exchanged dense")(
      "a2sgd-moments", po::value(&moments)->default_value(moments),
      "momentum/Adam with A2SGD: local (each rank's optimizer direction compressed) | decoded (moments of "
      "the decoded update) | frozen (Adam: variance frozen after the dense warm-up; adam-eps defaults to 1e-4)")(
      "a2sgd-average-every", po::value(&average_every)->default_value(average_every),
      "average the replicas every K steps (0: never); default for lstm 200, for the mlp with momentum or adam "
      "100")("topk-ratio", po::value(&topk_ratio)->default_value(topk_ratio),
                                                       "topk: fraction of entries sent per step")(
      "randomk-ratio", po::value(&randomk_ratio)->default_value(randomk_ratio),
      "randomk: fraction of entries sent per step")("qsgd-levels", po::value(&qsgd_levels)->default_value(qsgd_levels),
                                                    "qsgd: quantisation levels s (ceil(log2(s+1)) + 1 bits per entry)")(
      "powersgd-rank", po::value(&powersgd_rank)->default_value(powersgd_rank),
      "powersgd: rank of each weight matrix's approximation")("gpu-aware-mpi", po::bool_switch(&gpu_aware),
                                                              "hand device pointers to MPI (CUDA/ROCm-aware MPI)");
  po::options_description out("Output");
  out.add_options()("eval-every", po::value(&eval_every),
                    "steps between evaluations (0: once, at the end; default: once per epoch)")(
      "eval-batch", po::value(&eval_batch)->default_value(eval_batch),
      "evaluation mini-batch size (lstm: token columns per rank; default 10)")(
      "log-every", po::value(&log_every)->default_value(log_every), "steps between progress/metrics records")(
      "output-dir", po::value(&c.output_dir), "directory for metrics.jsonl and config.ini")(
      "metrics", po::value(&c.metrics), "JSON Lines metrics file (default: <output-dir>/metrics.jsonl)")(
      "quiet", po::bool_switch(&c.quiet), "no progress output")("no-progress-bar",
                                                                "plain progress lines even on a terminal")(
      "divergence-threshold", po::value(&c.divergence_threshold)->default_value(c.divergence_threshold),
      "warn on every rank when the replica divergence exceeds this at an evaluation (0: off)")(
      "divergence-patience", po::value(&divergence_patience)->default_value(divergence_patience),
      "warn when the averaged model's first-split loss rose at this many consecutive evaluations (0: off)")(
      "divergence-gap", po::value(&c.divergence_gap)->default_value(c.divergence_gap),
      "warn when the averaged model's first-split loss is more than this fraction above rank 0's replica's (0: off)")(
      "stop-on-divergence", po::bool_switch(&c.stop_on_divergence),
      "stop every rank with exit code 3 when a divergence warning is raised")(
      "model-link", po::value(&model_link),
      "GBIT_PER_S:ALPHA_US[:half]: the summary adds the alpha-beta model's communication time per step on "
      "this link at this run's rank count (modelled_comm_s_per_step)")(
      "diagnostics-every", po::value(&diagnostics_every)->default_value(diagnostics_every),
      "every N steps a diagnostics record of each tensor's update against the mean gradient, and per-tensor "
      "replica divergence at evaluations (0: off)")(
      "collective-timeout", po::value(&c.collective_timeout)->default_value(c.collective_timeout),
      "seconds a rank may wait in one collective (raised to 20x the longest step seen) before it reports "
      "where it waits and exits with code 76 (0: off)");
  po::options_description ckpt("Checkpoints");
  ckpt.add_options()("checkpoint-dir", po::value(&c.checkpoint_dir), "directory of checkpoint files")(
      "checkpoint-every", po::value(&checkpoint_every)->default_value(checkpoint_every),
      "steps between checkpoints (0: only the final one, written when --checkpoint-dir is set)")(
      "keep-checkpoints", po::value(&keep_checkpoints)->default_value(keep_checkpoints),
      "newest checkpoints kept in the directory (0: all)")(
      "resume", po::value(&c.resume), "auto (newest valid checkpoint in --checkpoint-dir, or start fresh) | FILE")(
      "eval-only", po::bool_switch(&c.eval_only), "evaluate the checkpoint given by --resume and exit")(
      "resume-override", po::value(&resume_override),
      "settings that may differ from the checkpoint's, comma-separated: batch-size, dataset, model "
      "(otherwise a difference is an error)");

  po::options_description all;
  all.add(general).add(model).add(run).add(exch).add(out).add(ckpt);

  po::variables_map vm;
  try {
    // No positional options: a stray word (a typo, a value without its option) is an error, not
    // silently ignored.
    po::options_description hidden;
    hidden.add_options()("positional", po::value<std::vector<std::string>>());
    po::options_description visible_and_hidden;
    visible_and_hidden.add(all).add(hidden);
    po::positional_options_description positional;
    positional.add("positional", -1);
    po::store(po::command_line_parser(argc, argv).options(visible_and_hidden).positional(positional).run(), vm);
    if (vm.count("positional")) {
      std::string words;
      for (const std::string& w : vm["positional"].as<std::vector<std::string>>()) words += " '" + w + "'";
      throw InvalidArgument("unexpected argument" + words +
                            " (every option starts with --; a value follows its option)");
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::istringstream in(read_config_text(path));
      const po::parsed_options parsed = po::parse_config_file(in, all);
      for (const auto& option : parsed.options)
        if (option.string_key == "config")
          throw InvalidArgument("--config " + path + ": a config file cannot name a config file ('config = ...')");
      // Every value must parse, also those that the command line overrides (and that the store
      // into vm below therefore skips).
      po::variables_map scratch;
      po::store(parsed, scratch);
      po::store(parsed, vm);
    }
    po::notify(vm);
  } catch (po::error& e) {
    throw InvalidArgument(apps::option_error_message(e));
  }
  if (vm.count("help")) {
    std::ostringstream text;
    text << "a2sgd-train: data-parallel training with A2SGD or dense all-reduce\n\n"
         << "Usage: mpirun -np P a2sgd-train [options]\n\n"
         << all
         << "\nKokkos options (--kokkos-help) may be added. Exit codes: 0 success, 2 invalid options or "
            "data, 3 training diverged, 1 other errors.";
    help_text = text.str();
    return ParseOutcome::help;
  }
  if (vm.count("version")) return ParseOutcome::version;

  require(c.model == "mlp" || c.model == "lstm", "model", c.model, "unknown model (valid: mlp, lstm)");
  const bool lm = c.model == "lstm";
  // The language model's standard small configuration unless given (docs/training.md).
  if (lm && vm["dataset"].defaulted()) c.dataset = "ptb";
  if (lm && vm["hidden"].defaulted()) hidden = "200";
  if (lm && vm["batch-size"].defaulted()) batch = 20;
  if (lm && vm["eval-batch"].defaulted()) eval_batch = 10;
  if (lm && vm["lr-schedule"].defaulted()) schedule = "plateau";
  c.hidden = parse_widths(hidden);
  c.init = nn::parse_init_scheme(init);
  if (lm) {
    require(c.dataset == "ptb", "dataset", c.dataset, "the lstm model trains on a token corpus (valid: ptb)");
    require(c.hidden.size() == 1, "hidden", hidden, "the lstm model takes one hidden width");
    require(layers >= 1 && layers <= 64, "layers", layers, "must be in [1, 64]");
    require(bptt >= 1 && bptt <= 100000, "bptt", bptt, "must be in [1, 100000]");
    require(dropout >= 0.0 && dropout < 1.0, "dropout", dropout, "must be in [0, 1)");
  } else {
    require(c.dataset == "fashion-mnist" || c.dataset == "mnist" || c.dataset == "synthetic", "dataset", c.dataset,
            "unknown dataset for the mlp model (valid: fashion-mnist, mnist, synthetic; ptb needs --model lstm)");
    require(vm["layers"].defaulted() && vm["bptt"].defaulted() && vm["dropout"].defaulted() && !tie_weights, "model",
            c.model, "--layers, --bptt, --dropout and --tie-weights belong to --model lstm");
  }
  c.layers = layers;
  c.bptt = bptt;
  c.dropout = dropout;
  c.tie_weights = tie_weights;
  if (vm.count("clip")) require(std::isfinite(clip) && clip >= 0.0, "clip", clip, "must be >= 0 (0: off)");
  c.clip = vm.count("clip") ? clip : (lm ? 0.25 : 0.0);
  if (c.data_dir.empty() && c.dataset == "fashion-mnist") c.data_dir = "/usr/share/datasets/fashion-mnist";
  if (c.data_dir.empty() && c.dataset == "mnist") throw InvalidArgument("--dataset mnist needs --data-dir");
  require(syn_train > 0, "synthetic-train", syn_train, "must be positive");
  require(syn_test > 0, "synthetic-test", syn_test, "must be positive");
  require(syn_features > 0, "synthetic-features", syn_features, "must be positive");
  require(syn_classes >= 2 && syn_classes <= std::numeric_limits<int>::max(), "synthetic-classes", syn_classes,
          "must be in [2, " + std::to_string(std::numeric_limits<int>::max()) + "]");
  {
    // The generated data set lives in memory: (train + test) x features floats.
    const double bytes =
        4.0 * (static_cast<double>(syn_train) + static_cast<double>(syn_test)) * static_cast<double>(syn_features);
    const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    char buf[160];
    std::snprintf(buf, sizeof buf, "with %lld + %lld samples needs %.3g GB, more than this machine's %.3g GB",
                  syn_train, syn_test, bytes / 1e9, memory / 1e9);
    require(memory <= 0 || bytes < memory, "synthetic-features", syn_features, buf);
  }
  require(std::isfinite(separation) && separation > 0, "synthetic-separation", separation, "must be positive");
  c.synthetic = data::SyntheticConfig{syn_train, syn_test, syn_features, static_cast<int>(syn_classes), separation, 0};

  require(epochs > 0 || steps > 0, "epochs", epochs, "must be positive (or give --steps)");
  require(epochs >= 0, "epochs", epochs, "must not be negative");
  require(steps >= 0, "steps", steps, "must not be negative");
  require(batch > 0, "batch-size", batch, "must be positive");
  require(seed >= 0, "seed", seed, "must not be negative");
  require(log_every > 0, "log-every", log_every, "must be positive");
  require(eval_batch > 0, "eval-batch", eval_batch, "must be positive");
  require(!vm.count("eval-every") || eval_every >= 0, "eval-every", eval_every, "must not be negative");
  require(lr_warmup >= 0, "lr-warmup-steps", lr_warmup, "must not be negative");
  require(lr_step_size > 0, "lr-step-size", lr_step_size, "must be positive");
  require(warmup >= 0, "a2sgd-warmup-steps", warmup, "must not be negative");
  require(std::isfinite(c.collective_timeout) && c.collective_timeout >= 0.0 && c.collective_timeout <= 1e7,
          "collective-timeout", c.collective_timeout, "must be in [0, 1e7] seconds (0: off)");
  require(std::isfinite(c.divergence_threshold) && c.divergence_threshold >= 0.0, "divergence-threshold",
          c.divergence_threshold, "must be >= 0 (0: off)");
  require(std::isfinite(c.divergence_gap) && c.divergence_gap >= 0.0, "divergence-gap", c.divergence_gap,
          "must be >= 0 (0: off)");
  require(divergence_patience >= 0, "divergence-patience", divergence_patience, "must not be negative (0: off)");
  c.divergence_patience = static_cast<std::uint64_t>(divergence_patience);
  require(diagnostics_every >= 0, "diagnostics-every", diagnostics_every, "must not be negative (0: off)");
  c.diagnostics_every = static_cast<std::uint64_t>(diagnostics_every);
  if (vm.count("model-link")) {
    try {
      c.model_link = Link::parse(model_link, 0.0);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--model-link: ") + e.what());
    }
  }
  require(average_every >= 0, "a2sgd-average-every", average_every, "must not be negative");
  c.epochs = static_cast<std::uint64_t>(epochs);
  c.steps = static_cast<std::uint64_t>(steps);
  c.batch_size = batch;
  c.seed = static_cast<std::uint64_t>(seed);
  c.synthetic.seed = c.seed;
  c.log_every = static_cast<std::uint64_t>(log_every);
  c.eval_batch = eval_batch;
  if (vm.count("eval-every")) c.eval_every = static_cast<std::uint64_t>(eval_every);
  c.progress_bar = !vm.count("no-progress-bar");
  require(checkpoint_every >= 0, "checkpoint-every", checkpoint_every, "must not be negative");
  require(keep_checkpoints >= 0, "keep-checkpoints", keep_checkpoints, "must not be negative");
  c.checkpoint_every = static_cast<std::uint64_t>(checkpoint_every);
  c.keep_checkpoints = static_cast<std::uint64_t>(keep_checkpoints);
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty())
    throw InvalidArgument("--checkpoint-every needs --checkpoint-dir");
  if (vm.count("resume") && c.resume.empty())
    throw InvalidArgument("--resume: needs 'auto' or a checkpoint file, got an empty string");
  if (c.resume == "auto" && c.checkpoint_dir.empty()) throw InvalidArgument("--resume auto needs --checkpoint-dir");
  if (c.eval_only && (c.resume.empty() || c.resume == "auto")) throw InvalidArgument("--eval-only needs --resume FILE");
  if (vm.count("resume-override")) {
    if (c.resume.empty()) throw InvalidArgument("--resume-override needs --resume");
    std::stringstream list(resume_override);
    for (std::string item; std::getline(list, item, ',');) {
      if (item != "batch-size" && item != "dataset" && item != "model")
        throw InvalidArgument("--resume-override: \"" + item + "\" is not one of batch-size, dataset, model");
      c.resume_overrides.push_back(item);
    }
  }

  // Exchange method and its options.
  {
    std::string valid;
    bool known = false;
    for (const auto& name : exchange_methods()) {
      valid += (valid.empty() ? "" : ", ") + name;
      known = known || name == compressor;
    }
    require(known, "compressor", compressor, "unknown method (valid: " + valid + ")");
  }
  require(topk_ratio > 0 && topk_ratio <= 1, "topk-ratio", topk_ratio, "must be in (0, 1]");
  c.exchange.topk.ratio = topk_ratio;
  require(randomk_ratio > 0 && randomk_ratio <= 1, "randomk-ratio", randomk_ratio, "must be in (0, 1]");
  c.exchange.randomk.ratio = randomk_ratio;
  c.exchange.randomk.seed = static_cast<std::uint64_t>(seed);
  require(qsgd_levels >= 1 && qsgd_levels < (1 << 24), "qsgd-levels", qsgd_levels, "must be in [1, 16777215]");
  c.exchange.qsgd.levels = qsgd_levels;
  c.exchange.qsgd.seed = static_cast<std::uint64_t>(seed);
  require(powersgd_rank >= 1 && powersgd_rank <= 1024, "powersgd-rank", powersgd_rank, "must be in [1, 1024]");
  c.exchange.powersgd.rank = static_cast<int>(powersgd_rank);
  c.exchange.powersgd.seed = static_cast<std::uint64_t>(seed);
  c.exchange.method = compressor;
  c.exchange.common.gpu_aware_mpi = gpu_aware;
  c.exchange.a2sgd.averaging = parse_global_averaging(averaging);
  c.exchange.a2sgd.residual = parse_residual_reference(residual);
  c.exchange.a2sgd.granularity = parse_granularity(granularity);
  c.exchange.a2sgd.error_feedback = parse_switch("a2sgd-error-feedback", error_feedback);
  c.exchange.a2sgd.warmup_steps = static_cast<std::uint64_t>(warmup);
  c.exchange.a2sgd.average_every = static_cast<std::uint64_t>(average_every);
  c.exchange.a2sgd.moments = parse_moment_scheme(moments);
  c.exchange.a2sgd.zero_gradient = parse_zero_gradient(zero_gradient);

  // Defaults that converge for each method: heavy momentum at a dense-tuned rate can make A2SGD
  // replicas diverge (docs/algorithm.md), so A2SGD defaults to plain SGD; the language model's
  // standard recipe is plain SGD at lr 20 on the mean token loss with clipping.
  const bool dense = compressor == "dense";
  c.optimizer.kind = parse_optimizer_kind(optimizer.empty() ? (dense && !lm ? "momentum" : "sgd") : optimizer);
  // A2SGD settings that reach dense quality (docs/convergence.md), where the user chose none: the
  // language model's embedding and decoder need their own means (layer), rows of words absent from
  // a batch must not move (hold), and its replicas an average every 200 steps (0.5% of dense's
  // traffic); with momentum or Adam the MLP's replicas need averaging too (every 100 steps: 1% of
  // dense's traffic). The MLP with SGD keeps the pure O(1) exchange.
  if (compressor == "a2sgd") {
    const bool adaptive = c.optimizer.kind != OptimizerKind::sgd;
    if (lm && vm["a2sgd-granularity"].defaulted()) c.exchange.a2sgd.granularity = Granularity::layer;
    if (lm && vm["a2sgd-zero-gradient"].defaulted()) c.exchange.a2sgd.zero_gradient = ZeroGradient::hold;
    if (vm["a2sgd-average-every"].defaulted() && (lm || adaptive)) c.exchange.a2sgd.average_every = lm ? 200 : 100;
  }
  c.optimizer.momentum = momentum;
  c.optimizer.nesterov = nesterov;
  c.optimizer.weight_decay = weight_decay;
  c.optimizer.beta1 = beta1;
  c.optimizer.beta2 = beta2;
  // The frozen variance bounds the direction only through epsilon where the warm-up saw almost no
  // gradient: 1e-8 let the MLP diverge, 1e-4 trained (docs/algorithm.md).
  const bool frozen = compressor == "a2sgd" && c.exchange.a2sgd.moments == MomentScheme::frozen;
  c.optimizer.epsilon = frozen && vm["adam-eps"].defaulted() ? 1e-4 : eps;
  c.optimizer.validate();
  if (compressor == "a2sgd") {
    // The scheme's requirements (Adam for frozen, a warm-up to freeze after, no Nesterov) checked
    // before anything starts.
    try {
      check_moment_scheme(c.optimizer, c.exchange.a2sgd.moments, c.exchange.a2sgd.warmup_steps);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--a2sgd-moments ") + to_string(c.exchange.a2sgd.moments) + ": " + e.what());
    }
  }
  if (lr < 0 && vm.count("lr")) require(false, "lr", lr, "must be positive");
  c.lr.base_lr = vm.count("lr") ? lr : (lm ? 20.0 : dense ? 0.05 : 0.1);
  c.lr.kind = parse_lr_schedule_kind(schedule);
  c.lr.warmup_steps = static_cast<std::uint64_t>(lr_warmup);
  c.lr.step_size = static_cast<std::uint64_t>(lr_step_size);
  c.lr.gamma = gamma;
  c.lr.min_lr = lr_min;
  c.lr.plateau_divisor = plateau_divisor;
  c.lr.validate();
  return ParseOutcome::run;
}

std::string TrainConfig::to_ini() const {
  std::ostringstream o;
  o.precision(12);
  o << "# a2sgd-train effective configuration (read back with --config)\n";
  o << "model = " << model << "\nhidden = " << join(hidden) << "\ninit = " << nn::to_string(init) << '\n';
  if (model == "lstm")
    o << "layers = " << layers << "\nbptt = " << bptt << "\ndropout = " << dropout
      << "\ntie-weights = " << (tie_weights ? "true" : "false") << '\n';
  o << "clip = " << clip << '\n';
  o << "dataset = " << dataset << '\n';
  if (!data_dir.empty()) o << "data-dir = " << data_dir << '\n';
  o << "synthetic-train = " << synthetic.train_samples << "\nsynthetic-test = " << synthetic.test_samples
    << "\nsynthetic-features = " << synthetic.features << "\nsynthetic-classes = " << synthetic.classes
    << "\nsynthetic-separation = " << synthetic.separation << '\n';
  o << "epochs = " << epochs << "\nsteps = " << steps << "\nbatch-size = " << batch_size << "\nseed = " << seed << '\n';
  o << "optimizer = " << to_string(optimizer.kind) << "\nlr = " << lr.base_lr
    << "\nlr-schedule = " << to_string(lr.kind) << "\nlr-warmup-steps = " << lr.warmup_steps
    << "\nlr-step-size = " << lr.step_size << "\nlr-gamma = " << lr.gamma << "\nlr-min = " << lr.min_lr
    << "\nlr-plateau-divisor = " << lr.plateau_divisor << "\nmomentum = " << optimizer.momentum
    << "\nnesterov = " << (optimizer.nesterov ? "true" : "false") << "\nweight-decay = " << optimizer.weight_decay
    << "\nbeta1 = " << optimizer.beta1 << "\nbeta2 = " << optimizer.beta2 << "\nadam-eps = " << optimizer.epsilon
    << '\n';
  o << "compressor = " << exchange.method << "\na2sgd-averaging = " << to_string(exchange.a2sgd.averaging)
    << "\na2sgd-residual = " << to_string(exchange.a2sgd.residual)
    << "\na2sgd-granularity = " << to_string(exchange.a2sgd.granularity)
    << "\na2sgd-error-feedback = " << (exchange.a2sgd.error_feedback ? "on" : "off")
    << "\na2sgd-zero-gradient = " << to_string(exchange.a2sgd.zero_gradient)
    << "\na2sgd-warmup-steps = " << exchange.a2sgd.warmup_steps
    << "\na2sgd-moments = " << to_string(exchange.a2sgd.moments)
    << "\na2sgd-average-every = " << exchange.a2sgd.average_every << "\ntopk-ratio = " << exchange.topk.ratio
    << "\nrandomk-ratio = " << exchange.randomk.ratio << "\nqsgd-levels = " << exchange.qsgd.levels
    << "\npowersgd-rank = " << exchange.powersgd.rank << '\n';
  if (eval_every) o << "eval-every = " << *eval_every << '\n';
  o << "eval-batch = " << eval_batch << "\nlog-every = " << log_every << '\n';
  o << "collective-timeout = " << collective_timeout << '\n';
  o << "divergence-threshold = " << divergence_threshold << "\ndivergence-patience = " << divergence_patience
    << "\ndivergence-gap = " << divergence_gap << "\nstop-on-divergence = " << (stop_on_divergence ? "true" : "false")
    << '\n';
  o << "diagnostics-every = " << diagnostics_every << '\n';
  if (model_link)
    o << "model-link = " << model_link->gbit_per_s() << ':' << model_link->alpha_s * 1e6
      << (model_link->full_duplex ? "" : ":half") << '\n';
  return o.str();
}

TrainerConfig TrainConfig::trainer() const {
  TrainerConfig t;
  t.epochs = epochs;
  t.steps = steps;
  t.seed = seed;
  t.optimizer = optimizer;
  t.lr = lr;
  t.exchange = exchange;
  t.clip_norm = clip;
  t.eval_every = eval_every;
  t.log_every = log_every;
  t.checkpoint_dir = checkpoint_dir;
  t.checkpoint_every = checkpoint_every;
  t.keep_checkpoints = keep_checkpoints;
  t.resume = resume;
  t.eval_only = eval_only;
  t.resume_overrides = resume_overrides;
  t.divergence_threshold = divergence_threshold;
  t.divergence_patience = divergence_patience;
  t.divergence_gap = divergence_gap;
  t.diagnostics_every = diagnostics_every;
  t.model_link = model_link;
  t.stop_on_divergence = stop_on_divergence;
  return t;
}

}  // namespace a2sgd::train
