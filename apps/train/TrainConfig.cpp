#include "TrainConfig.hpp"

#include "../common/OptionErrors.hpp"
#include "../common/RegistryOptions.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

namespace po = boost::program_options;

namespace a2sgd::train {
namespace {

template <class T>
void require(bool ok, const std::string& option, const T& value, const std::string& rule) {
  if (!ok) {
    std::ostringstream out;
    out << "--" << option << " " << value << ": " << rule;
    throw InvalidArgument(out.str());
  }
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

// What the command line holds before it is checked and turned into a TrainConfig. Signed types
// for sizes, so that "-5" is refused with a message instead of wrapping around.
struct Raw {
  std::string config_file, dataset, optimizer, schedule = "constant", compressor = "a2sgd";
  std::string resume_override, model_link;
  std::string project_ranks = "8,32,128", project_links = "10:10,100:1.5";
  long long epochs = 3, steps = 0, batch = 64, eval_every = -1, log_every = 50, lr_warmup = 0;
  long long lr_step_size = 1000, eval_batch = 1000, seed = 1, checkpoint_every = 0, keep_checkpoints = 3;
  long long divergence_patience = 3, diagnostics_every = 0;
  double lr = -1.0, momentum = 0.9, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, gamma = 0.1;
  double lr_min = 0.0, clip = -1.0, plateau_divisor = 4.0;
  bool nesterov = false, gpu_aware = false;
  double bucket_mb = 25.0, first_bucket_mb = 1.0;  // PyTorch DDP's bucket_cap_mb and first bucket
  std::string overlap = "on";
};

po::options_description general_options(Raw& r) {
  po::options_description d("General");
  d.add_options()("help,h", "show this help and exit")("version", "show versions and exit")(
      "list-methods", "list the exchange methods (name and what a step sends) and exit")(
      "list-models", "list the models (name, datasets, what it is) and exit")(
      "config", po::value(&r.config_file), "INI file with option=value lines (command line wins)")(
      "seed", po::value(&r.seed)->default_value(r.seed), "seed of initialisation, data order and synthetic data");
  return d;
}

po::options_description model_options(TrainConfig& c) {
  po::options_description d("Model and data (a model's own options: --list-models)");
  std::string models;
  for (const auto& k : model_registry()) models += (models.empty() ? "" : " | ") + k.name;
  d.add_options()("model", po::value(&c.model)->default_value(c.model), models.c_str())(
      "dataset", po::value<std::string>(), "the model's dataset (default: its first, --list-models)")(
      "data-dir", po::value(&c.data_dir),
      "directory of the dataset's files (default: the data home's <dataset> folder, $A2SGD_DATA_DIR/<dataset>, "
      "else ${XDG_DATA_HOME:-~/.local/share}/a2sgd/<dataset>, where a2sgd-fetch-data puts it; fashion-mnist "
      "also /usr/share/datasets/fashion-mnist)");
  apps::add_model_options(d);
  return d;
}

po::options_description training_options(Raw& r) {
  po::options_description d("Training");
  d.add_options()("epochs", po::value(&r.epochs)->default_value(r.epochs), "epochs over each rank's shard")(
      "steps", po::value(&r.steps)->default_value(r.steps), "total steps (> 0 overrides --epochs)")(
      "batch-size", po::value(&r.batch)->default_value(r.batch),
      "mini-batch size per rank (lstm: token columns; default 20)")(
      "optimizer", po::value(&r.optimizer), "sgd | momentum | adam (default: momentum for a dense mlp, sgd otherwise)")(
      "lr", po::value(&r.lr),
      "learning rate (default: mlp 0.05 dense, 0.1 otherwise, 0.02 a2sgd and local with momentum, 0.001 with adam; "
      "lstm "
      "20, a2sgd with sgd 30, with adam 0.002, a2sgd 0.003)")(
      "lr-schedule", po::value(&r.schedule)->default_value(r.schedule),
      "constant | step | cosine | plateau (divide by --lr-plateau-divisor when the first evaluation split's "
      "loss stops improving; default for lstm)")("lr-plateau-divisor",
                                                 po::value(&r.plateau_divisor)->default_value(r.plateau_divisor),
                                                 "plateau schedule: divisor of the learning rate")(
      "clip", po::value(&r.clip), "clip each rank's gradient to this global L2 norm (default: lstm 0.25, mlp off)")(
      "lr-warmup-steps", po::value(&r.lr_warmup),
      "steps over which the learning rate rises linearly to --lr (default: lstm with adam 200, A2SGD's first "
      "averaging period, for every method; 0 otherwise)")(
      "lr-step-size", po::value(&r.lr_step_size)->default_value(r.lr_step_size), "step schedule: steps between decays")(
      "lr-gamma", po::value(&r.gamma)->default_value(r.gamma), "step schedule: decay factor")(
      "lr-min", po::value(&r.lr_min)->default_value(r.lr_min), "cosine schedule: final learning rate")(
      "momentum", po::value(&r.momentum)->default_value(r.momentum), "momentum coefficient")(
      "nesterov", po::bool_switch(&r.nesterov), "Nesterov momentum")(
      "weight-decay", po::value(&r.weight_decay)->default_value(r.weight_decay), "decoupled weight decay")(
      "beta1", po::value(&r.beta1)->default_value(r.beta1), "adam beta1")(
      "beta2", po::value(&r.beta2)->default_value(r.beta2), "adam beta2")(
      "adam-eps", po::value(&r.eps)->default_value(r.eps), "adam epsilon");
  return d;
}

po::options_description exchange_options(Raw& r) {
  po::options_description d("Gradient exchange (--list-methods; a model may recommend other defaults)");
  std::string methods;
  for (const auto& name : exchange_methods()) methods += (methods.empty() ? "" : " | ") + name;
  d.add_options()("compressor", po::value(&r.compressor)->default_value(r.compressor), methods.c_str())(
      "gpu-aware-mpi", po::bool_switch(&r.gpu_aware), "hand device pointers to MPI (CUDA/ROCm-aware MPI)")(
      "bucket-mb", po::value(&r.bucket_mb)->default_value(r.bucket_mb),
      "gradient bucket cap in MiB (PyTorch DDP's bucket_cap_mb); methods that exchange per bucket (dense) "
      "start one collective per bucket; 0: one bucket")(
      "first-bucket-mb", po::value(&r.first_bucket_mb)->default_value(r.first_bucket_mb),
      "the first bucket's cap in MiB (DDP's 1 MiB: it starts soonest)")(
      "overlap", po::value(&r.overlap)->default_value(r.overlap),
      "on | off: start each bucket's collective during the backward pass (off: the same collectives after it; "
      "results are identical). Not with clipping (it needs the whole gradient, then exchanged in one piece) or at "
      "--diagnostics-every steps");
  apps::add_method_options(d);
  return d;
}

po::options_description averaging_options() {
  po::options_description d(
      "Periodic averaging, any method (defaults where none is given: mlp a2sgd every 100 steps with the outer "
      "nesterov step, lr 0.7, momentum 0.9; lstm a2sgd and local every 200; local otherwise every 100)");
  apps::add_averaging_options(d);
  return d;
}

po::options_description output_options(Raw& r, TrainConfig& c) {
  po::options_description d("Output");
  d.add_options()("eval-every", po::value(&r.eval_every),
                  "steps between evaluations (0: once, at the end; default: once per epoch)")(
      "eval-batch", po::value(&r.eval_batch)->default_value(r.eval_batch),
      "evaluation mini-batch size (lstm: token columns per rank; default 10)")(
      "log-every", po::value(&r.log_every)->default_value(r.log_every), "steps between progress/metrics records")(
      "output-dir", po::value(&c.output_dir), "directory for metrics.jsonl and config.ini")(
      "metrics", po::value(&c.metrics), "JSON Lines metrics file (default: <output-dir>/metrics.jsonl)")(
      "quiet", po::bool_switch(&c.quiet), "no progress output")("no-progress-bar",
                                                                "plain progress lines even on a terminal")(
      "divergence-threshold", po::value(&c.divergence_threshold)->default_value(c.divergence_threshold),
      "warn on every rank when the replica divergence exceeds this at an evaluation (0: off)")(
      "divergence-patience", po::value(&r.divergence_patience)->default_value(r.divergence_patience),
      "warn when the averaged model's first-split loss rose at this many consecutive evaluations (0: off)")(
      "divergence-gap", po::value(&c.divergence_gap)->default_value(c.divergence_gap),
      "warn when the averaged model's first-split loss is more than this fraction above rank 0's replica's (0: off)")(
      "stop-on-divergence", po::bool_switch(&c.stop_on_divergence),
      "stop every rank with exit code 3 when a divergence warning is raised")(
      "diagnostics-every", po::value(&r.diagnostics_every)->default_value(r.diagnostics_every),
      "every N steps a diagnostics record of each tensor's update against the mean gradient, and per-tensor "
      "replica divergence at evaluations (0: off)")(
      "model-link", po::value(&r.model_link),
      "GBIT_PER_S:ALPHA_US[:half]: the summary adds the alpha-beta model's communication time per step on "
      "this link at this run's rank count (modelled_comm_s_per_step)")(
      "project-ranks", po::value(&r.project_ranks)->default_value(r.project_ranks),
      "P,P,...: rank counts the summary projects this run's exchange to with the alpha-beta model "
      "(modelled_comm_s_p<P>_<G>gbps, on every --project-links link)")(
      "project-links", po::value(&r.project_links)->default_value(r.project_links),
      "GBIT_PER_S:ALPHA_US[:half],...: the links of those projections (each rate once: the keys name it)")(
      "collective-timeout", po::value(&c.collective_timeout)->default_value(c.collective_timeout),
      "seconds a rank may wait in one collective (raised to 20x the longest step seen) before it reports "
      "where it waits and exits with code 76 (0: off)");
  return d;
}

po::options_description checkpoint_options(Raw& r, TrainConfig& c) {
  po::options_description d("Checkpoints");
  d.add_options()("checkpoint-dir", po::value(&c.checkpoint_dir), "directory of checkpoint files")(
      "checkpoint-every", po::value(&r.checkpoint_every)->default_value(r.checkpoint_every),
      "steps between checkpoints (0: only the final one, written when --checkpoint-dir is set)")(
      "keep-checkpoints", po::value(&r.keep_checkpoints)->default_value(r.keep_checkpoints),
      "newest checkpoints kept in the directory (0: all)")(
      "resume", po::value(&c.resume), "auto (newest valid checkpoint in --checkpoint-dir, or start fresh) | FILE")(
      "eval-only", po::bool_switch(&c.eval_only), "evaluate the checkpoint given by --resume and exit")(
      "resume-override", po::value(&r.resume_override),
      "settings that may differ from the checkpoint's, comma-separated: batch-size, dataset, model "
      "(otherwise a difference is an error)");
  return d;
}

// The command line, then --config FILE (the command line wins). No positional options: a stray
// word (a typo, a value without its option) is an error, not silently ignored.
po::variables_map parse_command_line(int argc, char** argv, const po::options_description& all) {
  po::variables_map vm;
  try {
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
  return vm;
}

// The model, its options and its dataset; the model's training defaults where none was given.
void apply_model(const po::variables_map& vm, Raw& r, TrainConfig& c) {
  std::string valid;
  for (const auto& k : model_registry()) valid += (valid.empty() ? "" : ", ") + k.name;
  bool known = false;
  for (const auto& k : model_registry()) known = known || k.name == c.model;
  require(known, "model", c.model, "unknown model (valid: " + valid + ")");
  const ModelKind& kind = model_kind(c.model);
  c.model_options = apps::given_model_options(vm, kind);
  c.dataset = vm.count("dataset") ? vm["dataset"].as<std::string>() : kind.datasets.front();
  if (std::find(kind.datasets.begin(), kind.datasets.end(), c.dataset) == kind.datasets.end()) {
    std::string own, elsewhere;
    for (const auto& d : kind.datasets) own += (own.empty() ? "" : ", ") + d;
    for (const auto& k : model_registry())
      if (std::find(k.datasets.begin(), k.datasets.end(), c.dataset) != k.datasets.end())
        elsewhere = "; " + c.dataset + " needs --model " + k.name;
    require(false, "dataset", c.dataset,
            "the " + kind.name + " model trains on other data (valid: " + own + elsewhere + ")");
  }
  const TrainingDefaults& d = kind.defaults;
  if (vm["batch-size"].defaulted()) r.batch = d.batch_size;
  if (vm["eval-batch"].defaulted()) r.eval_batch = d.eval_batch;
  if (vm["lr-schedule"].defaulted()) r.schedule = to_string(d.schedule);
  if (vm.count("clip")) require(std::isfinite(r.clip) && r.clip >= 0.0, "clip", r.clip, "must be >= 0 (0: off)");
  c.clip = vm.count("clip") ? r.clip : d.clip;
}

void apply_run(const po::variables_map& vm, const Raw& r, TrainConfig& c) {
  require(r.epochs > 0 || r.steps > 0, "epochs", r.epochs, "must be positive (or give --steps)");
  require(r.epochs >= 0, "epochs", r.epochs, "must not be negative");
  require(r.steps >= 0, "steps", r.steps, "must not be negative");
  require(r.batch > 0, "batch-size", r.batch, "must be positive");
  require(r.seed >= 0, "seed", r.seed, "must not be negative");
  require(r.log_every > 0, "log-every", r.log_every, "must be positive");
  require(r.eval_batch > 0, "eval-batch", r.eval_batch, "must be positive");
  require(!vm.count("eval-every") || r.eval_every >= 0, "eval-every", r.eval_every, "must not be negative");
  c.epochs = static_cast<std::uint64_t>(r.epochs);
  c.steps = static_cast<std::uint64_t>(r.steps);
  c.batch_size = r.batch;
  c.seed = static_cast<std::uint64_t>(r.seed);
  c.log_every = static_cast<std::uint64_t>(r.log_every);
  c.eval_batch = r.eval_batch;
  if (vm.count("eval-every")) c.eval_every = static_cast<std::uint64_t>(r.eval_every);
}

void apply_output(const po::variables_map& vm, const Raw& r, TrainConfig& c) {
  require(std::isfinite(c.collective_timeout) && c.collective_timeout >= 0.0 && c.collective_timeout <= 1e7,
          "collective-timeout", c.collective_timeout, "must be in [0, 1e7] seconds (0: off)");
  require(std::isfinite(c.divergence_threshold) && c.divergence_threshold >= 0.0, "divergence-threshold",
          c.divergence_threshold, "must be >= 0 (0: off)");
  require(std::isfinite(c.divergence_gap) && c.divergence_gap >= 0.0, "divergence-gap", c.divergence_gap,
          "must be >= 0 (0: off)");
  require(r.divergence_patience >= 0, "divergence-patience", r.divergence_patience, "must not be negative (0: off)");
  c.divergence_patience = static_cast<std::uint64_t>(r.divergence_patience);
  require(r.diagnostics_every >= 0, "diagnostics-every", r.diagnostics_every, "must not be negative (0: off)");
  c.diagnostics_every = static_cast<std::uint64_t>(r.diagnostics_every);
  if (vm.count("model-link")) {
    try {
      c.model_link = Link::parse(r.model_link, 0.0);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--model-link: ") + e.what());
    }
  }
  c.projection_ranks.clear();
  std::stringstream ranks(r.project_ranks);
  for (std::string item; std::getline(ranks, item, ',');) {
    char* end = nullptr;
    errno = 0;
    const long long p = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || end != item.c_str() + item.size() || errno == ERANGE || p < 1 || p > (1LL << 24))
      throw InvalidArgument("--project-ranks " + r.project_ranks + ": \"" + item +
                            "\" is not a rank count in [1, 16777216] (a comma-separated list)");
    c.projection_ranks.push_back(static_cast<int>(p));
  }
  if (c.projection_ranks.empty()) throw InvalidArgument("--project-ranks: needs at least one rank count");
  c.projection_links.clear();
  std::stringstream links(r.project_links);
  for (std::string item; std::getline(links, item, ',');) {
    Link link;
    try {
      link = Link::parse(item, 0.0);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("--project-links " + r.project_links + ": " + e.what());
    }
    // The summary's keys name a link by its rounded rate: two links of one rate would collide.
    for (const Link& other : c.projection_links)
      if (std::lround(other.gbit_per_s()) == std::lround(link.gbit_per_s()))
        throw InvalidArgument("--project-links " + r.project_links + ": two links of " +
                              std::to_string(std::lround(link.gbit_per_s())) +
                              " Gb/s (the summary names each projection by its rate)");
    c.projection_links.push_back(link);
  }
  if (c.projection_links.empty()) throw InvalidArgument("--project-links: needs at least one link");
  c.progress_bar = !vm.count("no-progress-bar");
}

void apply_checkpoints(const po::variables_map& vm, const Raw& r, TrainConfig& c) {
  require(r.checkpoint_every >= 0, "checkpoint-every", r.checkpoint_every, "must not be negative");
  require(r.keep_checkpoints >= 0, "keep-checkpoints", r.keep_checkpoints, "must not be negative");
  c.checkpoint_every = static_cast<std::uint64_t>(r.checkpoint_every);
  c.keep_checkpoints = static_cast<std::uint64_t>(r.keep_checkpoints);
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty())
    throw InvalidArgument("--checkpoint-every needs --checkpoint-dir");
  if (vm.count("resume") && c.resume.empty())
    throw InvalidArgument("--resume: needs 'auto' or a checkpoint file, got an empty string");
  if (c.resume == "auto" && c.checkpoint_dir.empty()) throw InvalidArgument("--resume auto needs --checkpoint-dir");
  if (c.eval_only && (c.resume.empty() || c.resume == "auto")) throw InvalidArgument("--eval-only needs --resume FILE");
  if (vm.count("resume-override")) {
    if (c.resume.empty()) throw InvalidArgument("--resume-override needs --resume");
    std::stringstream list(r.resume_override);
    for (std::string item; std::getline(list, item, ',');) {
      if (item != "batch-size" && item != "dataset" && item != "model")
        throw InvalidArgument("--resume-override: \"" + item + "\" is not one of batch-size, dataset, model");
      c.resume_overrides.push_back(item);
    }
  }
}

// The optimizer and its schedule: the model's defaults for the exchange method where none given.
void apply_optimizer(const po::variables_map& vm, const Raw& r, TrainConfig& c) {
  const TrainingDefaults& d = model_kind(c.model).defaults;
  c.optimizer.kind = r.optimizer.empty() ? d.optimizer(r.compressor) : parse_optimizer_kind(r.optimizer);
  c.optimizer.momentum = r.momentum;
  c.optimizer.nesterov = r.nesterov;
  c.optimizer.weight_decay = r.weight_decay;
  c.optimizer.beta1 = r.beta1;
  c.optimizer.beta2 = r.beta2;
  c.optimizer.epsilon = r.eps;
  require(r.lr_warmup >= 0, "lr-warmup-steps", r.lr_warmup, "must not be negative");
  require(r.lr_step_size > 0, "lr-step-size", r.lr_step_size, "must be positive");
  if (r.lr < 0 && vm.count("lr")) require(false, "lr", r.lr, "must be positive");
  c.lr.base_lr = vm.count("lr") ? r.lr : d.lr(r.compressor, c.optimizer.kind);
  c.lr.kind = parse_lr_schedule_kind(r.schedule);
  c.lr.warmup_steps = vm.count("lr-warmup-steps") ? static_cast<std::uint64_t>(r.lr_warmup)
                      : d.lr_warmup_steps         ? d.lr_warmup_steps(r.compressor, c.optimizer.kind)
                                                  : 0;
  c.lr.step_size = static_cast<std::uint64_t>(r.lr_step_size);
  c.lr.gamma = r.gamma;
  c.lr.min_lr = r.lr_min;
  c.lr.plateau_divisor = r.plateau_divisor;
  c.lr.validate();
}

// The exchange method and its options: every method's given options checked (a typo is found
// whatever the method), then the chosen one's completed by the model's and the method's own
// recommendations and checked against the optimizer.
void apply_exchange(const po::variables_map& vm, const Raw& r, TrainConfig& c) {
  std::string valid;
  bool known = false;
  for (const auto& name : exchange_methods()) {
    valid += (valid.empty() ? "" : ", ") + name;
    known = known || name == r.compressor;
  }
  require(known, "compressor", r.compressor, "unknown method (valid: " + valid + ")");
  std::map<std::string, OptionValues> given = apps::given_method_options(vm);
  OptionValues& options = given.at(r.compressor);
  const ExchangeMethod& method = exchange_method(r.compressor);
  OptionValues averaging = apps::given_averaging_options(vm, method, options);
  const TrainingDefaults& defaults = model_kind(c.model).defaults;
  if (auto it = defaults.exchange_options.find(r.compressor); it != defaults.exchange_options.end())
    for (const auto& [name, value] : it->second) options.suggest(name, value);
  // The model's averaging for the method and optimizer; its outer optimizer not where the user
  // asked for no periodic average.
  const bool no_average = averaging.given("average-every") && averaging.text("average-every") == "0";
  if (defaults.averaging)
    for (const auto& [name, value] : defaults.averaging(r.compressor, c.optimizer.kind))
      if (!(no_average && name.rfind("outer-", 0) == 0)) averaging.suggest(name, value);
  std::vector<std::string> optimizer_given;
  if (!vm["adam-eps"].defaulted()) optimizer_given.push_back("epsilon");
  Recommendation rec{options, c.optimizer, optimizer_given, averaging};
  if (method.recommend) method.recommend(rec);
  c.optimizer.validate();
  const AveragingOptions policy = parse_averaging_options(averaging);
  check_averaging_optimizer(policy, c.optimizer);
  if (method.check_optimizer) method.check_optimizer(options, c.optimizer, policy);
  // A method's alias options carry the policy's values, so that the method, the summary and the
  // written config.ini agree with it.
  for (const auto& [own, name] : method.averaging_aliases) options.set(own, averaging.text(name));
  c.exchange.method = r.compressor;
  c.exchange.common.gpu_aware_mpi = r.gpu_aware;
  const auto mib = [](double mb) { return static_cast<std::size_t>(std::llround(mb * 1048576.0)); };
  require(std::isfinite(r.bucket_mb) && r.bucket_mb >= 0.0 && r.bucket_mb <= 1048576.0, "bucket-mb", r.bucket_mb,
          "must be in [0, 1048576] MiB (0: one bucket)");
  require(std::isfinite(r.first_bucket_mb) && r.first_bucket_mb > 0.0 &&
              (r.bucket_mb == 0.0 || r.first_bucket_mb <= r.bucket_mb),
          "first-bucket-mb", r.first_bucket_mb, "must be > 0 and at most --bucket-mb");
  require(r.overlap == "on" || r.overlap == "off", "overlap", r.overlap, "must be on or off");
  c.exchange.common.buckets.bytes = mib(r.bucket_mb);
  c.exchange.common.buckets.first_bytes = mib(r.first_bucket_mb);
  c.exchange.common.buckets.overlap = r.overlap == "on";
  c.exchange.common.averaging = policy;
  c.averaging_options = averaging;
  c.exchange.seed = c.seed;
  c.exchange.options.clear();
  for (const auto& [name, value] : options.entries()) c.exchange.options[name] = value;
  c.other_method_options = std::move(given);
  c.other_method_options.erase(r.compressor);
}

std::string help_text(const po::options_description& all) {
  std::ostringstream text;
  text << "a2sgd-train: data-parallel training with A2SGD or dense all-reduce\n\n"
       << "Usage: mpirun -np P a2sgd-train [options]\n\n"
       << all
       << "\nKokkos options (--kokkos-help) may be added. Exit codes: 0 success, 2 invalid options or data, 3 "
          "training diverged, 74 a checkpoint could not be written, 75 stopped by a signal after writing a "
          "checkpoint, 76 a collective timed out, 128 + n a second signal n, 1 other errors.";
  return text.str();
}

}  // namespace

ParseOutcome parse_options(int argc, char** argv, TrainConfig& c, std::string& help) {
  Raw r;
  po::options_description all;
  all.add(general_options(r))
      .add(model_options(c))
      .add(training_options(r))
      .add(exchange_options(r))
      .add(averaging_options())
      .add(output_options(r, c))
      .add(checkpoint_options(r, c));
  const po::variables_map vm = parse_command_line(argc, argv, all);
  if (vm.count("help")) {
    help = help_text(all);
    return ParseOutcome::help;
  }
  if (vm.count("version")) return ParseOutcome::version;
  if (vm.count("list-methods")) return ParseOutcome::list_methods;
  if (vm.count("list-models")) return ParseOutcome::list_models;
  try {
    apply_model(vm, r, c);
    apply_run(vm, r, c);
    apply_output(vm, r, c);
    apply_checkpoints(vm, r, c);
    apply_optimizer(vm, r, c);
    apply_exchange(vm, r, c);
  } catch (const OptionError& e) {
    throw InvalidArgument(apps::command_line_text(e));
  }
  return ParseOutcome::run;
}

std::string TrainConfig::to_ini() const {
  std::ostringstream o;
  o.precision(12);
  o << "# a2sgd-train effective configuration (read back with --config)\n";
  o << "model = " << model << '\n';
  for (const auto& spec : model_kind(model).options)
    o << spec.name << " = "
      << (spec.is_switch ? (model_options.on(spec.name) ? "true" : "false") : model_options.text(spec.name)) << '\n';
  o << "clip = " << clip << '\n';
  o << "dataset = " << dataset << '\n';
  if (!data_dir.empty()) o << "data-dir = " << data_dir << '\n';
  o << "epochs = " << epochs << "\nsteps = " << steps << "\nbatch-size = " << batch_size << "\nseed = " << seed << '\n';
  o << "optimizer = " << to_string(optimizer.kind) << "\nlr = " << lr.base_lr
    << "\nlr-schedule = " << to_string(lr.kind) << "\nlr-warmup-steps = " << lr.warmup_steps
    << "\nlr-step-size = " << lr.step_size << "\nlr-gamma = " << lr.gamma << "\nlr-min = " << lr.min_lr
    << "\nlr-plateau-divisor = " << lr.plateau_divisor << "\nmomentum = " << optimizer.momentum
    << "\nnesterov = " << (optimizer.nesterov ? "true" : "false") << "\nweight-decay = " << optimizer.weight_decay
    << "\nbeta1 = " << optimizer.beta1 << "\nbeta2 = " << optimizer.beta2 << "\nadam-eps = " << optimizer.epsilon
    << '\n';
  o << "compressor = " << exchange.method << '\n';
  const BucketOptions& buckets = exchange.common.buckets;
  o << "bucket-mb = " << static_cast<double>(buckets.bytes) / 1048576.0
    << "\nfirst-bucket-mb = " << static_cast<double>(buckets.first_bytes) / 1048576.0
    << "\noverlap = " << (buckets.overlap ? "on" : "off") << '\n';
  // Every method's options: the chosen one's as the run uses them, the others' as given.
  for (const auto& m : exchange_registry()) {
    const auto other = other_method_options.find(m.name);
    for (const auto& spec : m.options) {
      const std::string value = m.name == exchange.method             ? exchange.options.at(spec.name)
                                : other != other_method_options.end() ? other->second.text(spec.name)
                                                                      : spec.default_value;
      o << apps::method_flag(m.name, spec.name) << " = " << value << '\n';
    }
  }
  for (const auto& [name, value] : averaging_options.entries()) o << name << " = " << value << '\n';
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
  o << "project-ranks = ";
  for (std::size_t i = 0; i < projection_ranks.size(); ++i) o << (i ? "," : "") << projection_ranks[i];
  o << "\nproject-links = ";
  for (std::size_t i = 0; i < projection_links.size(); ++i)
    o << (i ? "," : "") << projection_links[i].gbit_per_s() << ':' << projection_links[i].alpha_s * 1e6
      << (projection_links[i].full_duplex ? "" : ":half");
  o << '\n';
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
  t.stop_on_divergence = stop_on_divergence;
  t.diagnostics_every = diagnostics_every;
  t.model_link = model_link;
  t.projection_links = projection_links;
  t.projection_ranks = projection_ranks;
  return t;
}

}  // namespace a2sgd::train
