#pragma once
// Options of a2sgd-bench.

#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>

#include <map>
#include <string>
#include <vector>

namespace a2sgd::bench {

struct BenchConfig {
  std::vector<Index> sizes;          ///< values per gradient
  std::vector<std::string> methods;  ///< exchange methods, in order
  int repeats = 5;                   ///< timed steps per method and size (medians are reported)
  int warmup = 1;                    ///< untimed steps first
  std::string csv;                   ///< CSV output file ("" = none)
  bool project = false;              ///< print the alpha-beta projection
  int max_ranks = 4096;              ///< projection: p = 2, 4, ..., max_ranks
  std::vector<Link> links;           ///< projection: network links
  AllreduceModel allreduce_model = AllreduceModel::best;
  double compute_s = 0.0;  ///< projection: forward/backward time per step to add
  bool full_sort = true;   ///< time a full sort of the gradient next to Top-K
  Index mlp_batch = 64;    ///< rows of the MLP compute reference (0: skip it)
  std::uint64_t seed = 1;
  std::map<std::string, OptionValues> method_options;  ///< every method's options, as given

  /// The configuration of `method` for n values (its options, the seed, the layout).
  ExchangeConfig exchange(const std::string& method, const std::vector<TensorInfo>& layout) const {
    ExchangeConfig cfg;
    cfg.method = method;
    cfg.seed = seed;
    cfg.layout = layout;
    for (const auto& [name, value] : method_options.at(method).entries()) cfg.options[name] = value;
    return cfg;
  }
};

enum class ParseOutcome { run, help };

/// Throws InvalidArgument naming the option and the problem.
ParseOutcome parse_options(int argc, char** argv, BenchConfig& config, std::string& help);

/// "64M" -> 64 * 2^20; K, M and G are powers of 2^10; a plain integer is taken as is.
Index parse_size(const std::string& text);

}  // namespace a2sgd::bench
