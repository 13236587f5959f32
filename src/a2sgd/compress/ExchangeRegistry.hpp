#pragma once
/// @file ExchangeRegistry.hpp
/// The exchange methods, each declared once, by its own source file: its name, what it sends,
/// its options, how it is built, and the memory traffic of its kernels. Everything that lists
/// methods reads this registry: make_exchange(), the applications' options, help and
/// validation, a2sgd-bench's passes, the tests. docs/extending.md says how to add a method.
///
/// A method registers itself with
///
///     A2SGD_REGISTER_EXCHANGE(mymethod) {
///       ExchangeMethod m;
///       m.summary = "...";
///       m.options = {...};
///       m.make = [](const ExchangeContext& c, const OptionValues& o) { ... };
///       m.kernel_traffic = [](double n, double payload, int p) { ... };
///       return m;
///     }
///
/// in a source file listed in src/CMakeLists.txt's A2SGD_EXCHANGE_SOURCES; the build finds the
/// registration there and the registry calls it (the name is the macro's argument).

#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/KernelTraffic.hpp>
#include <a2sgd/core/Options.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace a2sgd {

/// What every method is built from, besides its own options.
struct ExchangeContext {
  const Communicator& comm;
  Index n = 0;
  std::vector<TensorInfo> layout;  ///< the model's tensors in buffer order, covering n
  CommonExchangeOptions common;
  std::uint64_t seed = 0;  ///< the run's seed, for methods with random streams
  ExecutionSpace exec;
};

/// What a method may set before a run: its own options and the averaging policy's
/// (averaging_option_specs()) that the user left at their defaults (OptionValues::suggest), and
/// optimizer settings the user did not give (`optimizer_given` holds the names of those given:
/// "epsilon", ...).
struct Recommendation {
  OptionValues& options;
  OptimizerConfig& optimizer;
  std::vector<std::string> optimizer_given;
  OptionValues& averaging;
};

/// A registered method.
struct ExchangeMethod {
  std::string name;     ///< set by the registry: the registration's name
  std::string summary;  ///< one line: what a step sends
  std::vector<OptionSpec> options;
  /// Optional: throws OptionError for values the method cannot take (ranges, names), without
  /// building anything; make() refuses them too.
  std::function<void(const OptionValues&)> check_options;
  /// Builds the method (collective; see Exchange).
  std::function<std::unique_ptr<Exchange>(const ExchangeContext&, const OptionValues&)> make;
  /// Memory traffic of one SGD step's kernels on n values; `payload`: the bytes this rank sends
  /// per step, p: ranks.
  std::function<KernelTraffic(double n, double payload, int p)> kernel_traffic;
  /// Optional: throws InvalidArgument when the options cannot work with this optimizer and
  /// averaging policy.
  std::function<void(const OptionValues&, const OptimizerConfig&, const AveragingOptions&)> check_optimizer;
  /// Own options that are other names of averaging options (own name -> averaging option name),
  /// kept for command lines written before averaging was every method's: an application reads
  /// either and refuses the two set differently.
  std::map<std::string, std::string> averaging_aliases;
  /// Optional: settings that make the method train with this optimizer (see Recommendation).
  std::function<void(Recommendation&)> recommend;
};

/// Every registered method, in the build's order (src/CMakeLists.txt).
const std::vector<ExchangeMethod>& exchange_registry();

/// The method of that name; InvalidArgument listing the valid names otherwise.
const ExchangeMethod& exchange_method(const std::string& name);

/// A method's options at their defaults, ready to set().
OptionValues default_options(const ExchangeMethod& method);

}  // namespace a2sgd

/// Defines the registration of exchange method `id` (see the file comment).
#define A2SGD_REGISTER_EXCHANGE(id) ::a2sgd::ExchangeMethod a2sgd_registered_exchange_##id()
