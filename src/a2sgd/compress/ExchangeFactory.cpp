#include <a2sgd/compress/ExchangeFactory.hpp>

namespace a2sgd {

std::vector<std::string> exchange_methods() {
  std::vector<std::string> names;
  for (const auto& m : exchange_registry()) names.push_back(m.name);
  return names;
}

OptionValues method_options(const ExchangeConfig& config) {
  OptionValues values = default_options(exchange_method(config.method));
  for (const auto& [name, value] : config.options) values.set(name, value);
  return values;
}

std::unique_ptr<Exchange> make_exchange(const ExchangeConfig& config, const Communicator& comm, Index n,
                                        const ExecutionSpace& exec) {
  const ExchangeMethod* method = nullptr;
  for (const auto& m : exchange_registry())
    if (m.name == config.method) method = &m;
  std::string valid;
  for (const auto& name : exchange_methods()) valid += (valid.empty() ? "" : ", ") + name;
  // Collective, so that a name known on some ranks only fails everywhere instead of hanging.
  comm.raise_if_any(method == nullptr, "unknown exchange method \"" + config.method + "\" (valid: " + valid + ")");
  return method->make(ExchangeContext{comm, n, config.layout, config.common, config.seed, exec},
                      method_options(config));
}

}  // namespace a2sgd
