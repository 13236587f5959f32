#pragma once
/// @file ExchangeFactory.hpp
/// Select an exchange method by name, with its options as text (ExchangeRegistry.hpp lists the
/// methods and their options).

#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/Methods.hpp>  // every registered method's header (generated), to build one directly

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace a2sgd {

/// Everything needed to build any method.
struct ExchangeConfig {
  std::string method = "a2sgd";  ///< one of exchange_methods()
  CommonExchangeOptions common;
  /// The method's own options by name (its ExchangeMethod::options); the others keep their
  /// defaults. A name the method does not declare is an error.
  std::map<std::string, std::string> options;
  std::uint64_t seed = 0;  ///< the run's seed, for methods with random streams
  /// The model's tensors (ParameterStore::tensors()), for methods that work per tensor
  /// (powersgd, layer-wise a2sgd). Must cover exactly the n values.
  std::vector<TensorInfo> layout;
};

/// Names accepted by make_exchange(), in the registry's order.
std::vector<std::string> exchange_methods();

/// The options of config.method with config.options applied (OptionError for an unknown name).
OptionValues method_options(const ExchangeConfig& config);

/// Builds the method named config.method (collective). An unknown name, on any rank, throws
/// CollectiveError listing the valid names on every rank.
std::unique_ptr<Exchange> make_exchange(const ExchangeConfig& config, const Communicator& comm, Index n,
                                        const ExecutionSpace& exec = ExecutionSpace());

}  // namespace a2sgd
