#include "BenchConfig.hpp"

#include "common/RegistryOptions.hpp"

#include "common/OptionErrors.hpp"

#include <a2sgd/core/Error.hpp>

#include <boost/program_options.hpp>

#include <sstream>

namespace a2sgd::bench {
namespace po = boost::program_options;
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

Index parse_size(const std::string& text) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  Index scale = 1;
  if (used + 1 == text.size()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        scale = Index(1) << 10;
        break;
      case 'M':
      case 'm':
        scale = Index(1) << 20;
        break;
      case 'G':
      case 'g':
        scale = Index(1) << 30;
        break;
      default:
        used = 0;
    }
  } else if (used != text.size()) {
    used = 0;
  }
  if (used == 0 || value < 1 || value > (Index(1) << 40) / scale)
    throw InvalidArgument("--sizes: \"" + text + "\" is not a positive size (e.g. 1000000, 16M, 1G)");
  return static_cast<Index>(value) * scale;
}

ParseOutcome parse_options(int argc, char** argv, BenchConfig& c, std::string& help) {
  std::string sizes = "1M,16M,64M", methods = "all", links = "10:10,100:1.5,200:1", model = "best";
  double compute_ms = 0.0;
  long long seed = 1;
  bool no_sort = false;
  po::options_description desc(
      "a2sgd-bench: per-method compress, communicate and decompress-and-apply times of one step on\n"
      "gradients of the given sizes at the current number of ranks, each kernel phase against the\n"
      "memory ceilings of its access pattern measured in the same run (read, copy, triad, axpy,\n"
      "read-modify-write); optionally projected to large p (docs/methods.md).\n\n"
      "usage: mpiexec -n P a2sgd-bench [options]\n\nOptions");
  std::string valid;
  for (const auto& m : exchange_methods()) valid += (valid.empty() ? "" : " | ") + m;
  desc.add_options()("help,h", "show this help and exit")("sizes", po::value(&sizes)->default_value(sizes),
                                                          "gradient sizes in values (K, M, G: 2^10, 2^20, 2^30)")(
      "methods", po::value(&methods)->default_value(methods), ("comma-separated: all | " + valid).c_str())(
      "repeats", po::value(&c.repeats)->default_value(c.repeats), "timed steps per method and size (medians)")(
      "warmup", po::value(&c.warmup)->default_value(c.warmup), "untimed steps before them")(
      "csv", po::value(&c.csv), "write every measured and projected row to this CSV file")(
      "project", po::bool_switch(&c.project), "print projected step times for p = 2 .. --max-ranks")(
      "max-ranks", po::value(&c.max_ranks)->default_value(c.max_ranks), "projection: largest p (a power of 2)")(
      "links", po::value(&links)->default_value(links), "projection: links as GBIT_PER_S[:ALPHA_US], comma-separated")(
      "allreduce-model", po::value(&model)->default_value(model),
      "projection: all-reduce algorithm: ring | doubling | halving | best (the cheapest)")(
      "compute-ms", po::value(&compute_ms)->default_value(compute_ms),
      "projection: forward/backward milliseconds per step to add (e.g. a2sgd-train's compute)")(
      "no-sort", po::bool_switch(&no_sort), "skip the full-sort reference next to Top-K")(
      "mlp-batch", po::value(&c.mlp_batch)->default_value(c.mlp_batch),
      "rows of the Fashion-MNIST MLP's forward/backward timed against its GEMMs alone (0: skip)")(
      "seed", po::value(&seed)->default_value(seed), "seed of the gradients and of the methods' streams");
  apps::add_method_options(desc);
  std::ostringstream text;
  text << desc;
  help = text.str();
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (po::error& e) {
    throw InvalidArgument(apps::option_error_message(e));
  }
  if (vm.count("help")) return ParseOutcome::help;

  c.sizes.clear();
  for (const auto& s : split(sizes)) c.sizes.push_back(parse_size(s));
  if (c.sizes.empty()) throw InvalidArgument("--sizes: no size given");
  c.methods = methods == "all" ? exchange_methods() : split(methods);
  if (c.methods.empty()) throw InvalidArgument("--methods: no method given");
  for (const auto& m : c.methods) {
    bool known = false;
    for (const auto& v : exchange_methods()) known = known || v == m;
    if (!known) throw InvalidArgument("--methods: unknown method \"" + m + "\" (valid: all | " + valid + ")");
  }
  if (c.repeats < 1) throw InvalidArgument("--repeats: must be >= 1");
  if (c.warmup < 0) throw InvalidArgument("--warmup: must be >= 0");
  if (c.max_ranks < 2 || (c.max_ranks & (c.max_ranks - 1)) != 0 || c.max_ranks > (1 << 24))
    throw InvalidArgument("--max-ranks: must be a power of 2 in [2, 2^24]");
  c.links.clear();
  for (const auto& l : split(links)) c.links.push_back(Link::parse(l, 2e-6));
  if (c.links.empty()) throw InvalidArgument("--links: no link given");
  c.allreduce_model = parse_allreduce_model(model);
  if (!(compute_ms >= 0)) throw InvalidArgument("--compute-ms: must be >= 0");
  c.compute_s = compute_ms * 1e-3;
  c.full_sort = !no_sort;
  if (c.mlp_batch < 0 || c.mlp_batch > (Index(1) << 20))
    throw InvalidArgument("--mlp-batch " + std::to_string(c.mlp_batch) + ": must be in [0, 1048576]");
  if (seed < 0) throw InvalidArgument("--seed: must be >= 0");
  c.seed = static_cast<std::uint64_t>(seed);
  try {
    c.method_options = apps::given_method_options(vm);
  } catch (const OptionError& e) {
    throw InvalidArgument(apps::command_line_text(e));
  }
  return ParseOutcome::run;
}

}  // namespace a2sgd::bench
