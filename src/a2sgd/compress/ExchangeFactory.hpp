#pragma once
/// @file ExchangeFactory.hpp
/// Select an exchange method by name.

#include <a2sgd/compress/A2sgdExchange.hpp>
#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/PowerSgdExchange.hpp>
#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/RandomkExchange.hpp>
#include <a2sgd/compress/TopkExchange.hpp>

#include <memory>
#include <string>
#include <vector>

namespace a2sgd {

/// Everything needed to build any method; each method reads its own part.
struct ExchangeConfig {
  std::string method = "a2sgd";  ///< one of exchange_methods()
  CommonExchangeOptions common;
  A2sgdOptions a2sgd;
  TopkOptions topk;
  RandomkOptions randomk;
  QsgdOptions qsgd;
  PowerSgdOptions powersgd;
  /// The model's tensors (ParameterStore::tensors()); needed by methods that work per tensor
  /// (powersgd), ignored by the others. Must cover exactly the n values.
  std::vector<TensorInfo> layout;
};

/// Names accepted by make_exchange(), in display order.
std::vector<std::string> exchange_methods();

/// Builds the method named config.method (collective). An unknown name, on any rank, throws
/// CollectiveError listing the valid names on every rank.
std::unique_ptr<Exchange> make_exchange(const ExchangeConfig& config, const Communicator& comm, Index n,
                                        const ExecutionSpace& exec = ExecutionSpace());

}  // namespace a2sgd
