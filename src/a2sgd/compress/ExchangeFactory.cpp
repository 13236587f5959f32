#include <a2sgd/compress/CastExchange.hpp>
#include <a2sgd/compress/DenseExchange.hpp>
#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>

#include <functional>
#include <utility>

namespace a2sgd {
namespace {

using Builder =
    std::function<std::unique_ptr<Exchange>(const ExchangeConfig&, const Communicator&, Index, const ExecutionSpace&)>;

const std::vector<std::pair<std::string, Builder>>& registry() {
  static const std::vector<std::pair<std::string, Builder>> methods = {
      {"dense",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new DenseExchange(comm, n, c.common, exec));
       }},
      {"a2sgd",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         A2sgdOptions options = c.a2sgd;
         if (options.granularity == Granularity::layer && options.segments.empty())
           for (const auto& t : c.layout) options.segments.push_back(t.size);
         return std::unique_ptr<Exchange>(new A2sgdExchange(comm, n, options, c.common, exec));
       }},
      {"topk",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new TopkExchange(comm, n, c.topk, c.common, exec));
       }},
      {"randomk",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new RandomkExchange(comm, n, c.randomk, c.common, exec));
       }},
      {"qsgd",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new QsgdExchange(comm, n, c.qsgd, c.common, exec));
       }},
      {"efsign",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new EfSignExchange(comm, n, c.common, exec));
       }},
      {"powersgd",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         Index covered = 0;
         for (const auto& t : c.layout) covered += t.size;
         if (covered != n)
           throw InvalidArgument("powersgd: the tensor layout covers " + std::to_string(covered) +
                                 " values, not n = " + std::to_string(n));
         return std::unique_ptr<Exchange>(new PowerSgdExchange(comm, c.layout, c.powersgd, c.common, exec));
       }},
      {"fp16",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new CastExchange(comm, n, HalfFormat::fp16, c.common, exec));
       }},
      {"bf16",
       [](const ExchangeConfig& c, const Communicator& comm, Index n, const ExecutionSpace& exec) {
         return std::unique_ptr<Exchange>(new CastExchange(comm, n, HalfFormat::bf16, c.common, exec));
       }},
  };
  return methods;
}

}  // namespace

std::vector<std::string> exchange_methods() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::unique_ptr<Exchange> make_exchange(const ExchangeConfig& config, const Communicator& comm, Index n,
                                        const ExecutionSpace& exec) {
  const Builder* builder = nullptr;
  for (const auto& entry : registry())
    if (entry.first == config.method) builder = &entry.second;
  std::string valid;
  for (const auto& name : exchange_methods()) valid += (valid.empty() ? "" : ", ") + name;
  // Collective, so that a name known on some ranks only fails everywhere instead of hanging.
  comm.raise_if_any(builder == nullptr, "unknown exchange method \"" + config.method + "\" (valid: " + valid + ")");
  return (*builder)(config, comm, n, exec);
}

}  // namespace a2sgd
