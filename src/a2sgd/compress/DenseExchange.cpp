#include <a2sgd/compress/DenseExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>

namespace a2sgd {

DenseExchange::DenseExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                             const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "dense") {}

std::vector<std::pair<std::string, std::string>> DenseExchange::own_options() const {
  return {};
}

void DenseExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                            StepStats& stats) {
  if (buckets().size() > 1)
    finish_buckets(grad, stats);
  else
    allreduce_sum(grad, stats);
  // Dividing by p happens inside the optimizer kernel: one pass instead of two.
  apply_dense(params, grad, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
}

Request DenseExchange::start_bucket(const FloatView& grad, std::size_t, GradientRange bucket, StepStats& stats) {
  return comm().iallreduce(grad.data() + bucket.begin, static_cast<std::size_t>(bucket.size()), MPI_SUM, &stats);
}

}  // namespace a2sgd

A2SGD_REGISTER_EXCHANGE(dense) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "MPI_Allreduce of the whole gradient: 4 n bytes per rank and step";
  m.make = [](const ExchangeContext& c, const OptionValues&) -> std::unique_ptr<Exchange> {
    return std::make_unique<DenseExchange>(c.comm, c.n, c.common, c.exec);
  };
  m.kernel_traffic = [](double n, double, int) { return KernelTraffic{{}, {{traffic::sgd(n)}}}; };
  return m;
}
